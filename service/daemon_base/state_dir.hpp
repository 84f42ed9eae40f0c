// state_dir: aqsd's state directory: its layout, the cluster key, the pid file.
#pragma once

#include <filesystem>
#include <stdexcept>
#include <string>

namespace aqs::daemon {

// The state directory could not be prepared; the message is one line.
class state_dir_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

// DIR/cluster.key      the key TCP peers prove they hold (mode 0600)
// DIR/aqsd.sock        the Unix socket (default)
// DIR/aqsd.pid         our pid while we run
// DIR/aqsd.addr        the TCP address we listen on (with --listen)
// DIR/aqsd.http        the HTTP address we listen on (with --http)
// DIR/revoked-tokens   HTTP bearer tokens revoked (ftoken --revoke), 0600
// DIR/aqsd.log         the log when not in the foreground
// DIR/postgres/        the private PostgreSQL (without --db)
struct state_dir {
  std::filesystem::path root;

  std::filesystem::path key_file() const { return root / "cluster.key"; }
  std::filesystem::path socket() const { return root / "aqsd.sock"; }
  std::filesystem::path pid_file() const { return root / "aqsd.pid"; }
  std::filesystem::path addr_file() const { return root / "aqsd.addr"; }
  std::filesystem::path http_addr_file() const { return root / "aqsd.http"; }
  std::filesystem::path revoked_tokens_file() const { return root / "revoked-tokens"; }
  std::filesystem::path log_file() const { return root / "aqsd.log"; }
  std::filesystem::path postgres_dir() const { return root / "postgres"; }

  // Creates the directory if missing (mode 0755: users reach the socket in
  // it; the key inside is 0600). Throws state_dir_error if it cannot, or if
  // it exists and is not a directory.
  void prepare() const;
  // Reads the cluster key, creating it (32 random bytes as hex, 0600, written
  // to a temporary file and renamed) at first start. A key file readable by
  // others is refused: anyone holding the key can run jobs as any user.
  // Throws state_dir_error.
  std::string load_or_create_key() const;
  // Writes `text` to `path` atomically (temporary file and rename).
  static void write_file(const std::filesystem::path& path, const std::string& text, unsigned mode);
};

}  // namespace aqs::daemon
