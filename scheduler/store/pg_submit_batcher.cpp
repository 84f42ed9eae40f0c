// pg_submit_batcher: group commit of submissions: the queue, the committer
// threads, and the one-statement batch insert with its in-doubt resolution.
#include "store/pg_submit_batcher.hpp"

#include <algorithm>
#include <optional>
#include <unordered_map>

#include "store/job_rules.hpp"
#include "store/sql_text.hpp"

namespace aqs::store {

namespace {

void append_batch_json(std::string& out, std::size_t ord, const job_submission& q) {
  out += "{\"ord\":" + std::to_string(ord) + ",\"token\":";
  append_json_string(out, q.submit_token);
  out += ",\"user_name\":";
  append_json_string(out, q.user_name);
  out += ",\"uid\":" + std::to_string(q.uid) + ",\"gid\":" + std::to_string(q.gid) + ",\"name\":";
  append_json_string(out, q.name);
  out += ",\"script\":";
  append_json_string(out, q.script);
  out += ",\"argv\":[";
  for (std::size_t i = 0; i < q.argv.size(); ++i) {
    if (i) out.push_back(',');
    append_json_string(out, q.argv[i]);
  }
  out += "],\"workdir\":";
  append_json_string(out, q.workdir);
  out += ",\"environment\":[";
  for (std::size_t i = 0; i < q.environment.size(); ++i) {
    if (i) out.push_back(',');
    append_json_string(out, q.environment[i]);
  }
  out += "],\"stdout_pattern\":";
  append_json_string(out, q.stdout_pattern);
  out += ",\"stderr_pattern\":";
  append_json_string(out, q.stderr_pattern);
  out += ",\"min_pe\":" + std::to_string(q.min_pe) + ",\"max_pe\":" + std::to_string(q.max_pe);
  out += ",\"adaptive\":";
  out += q.adaptive ? "true" : "false";
  out += ",\"walltime_s\":" + (q.walltime_s ? std::to_string(*q.walltime_s) : std::string("null"));
  out += ",\"priority\":" + std::to_string(q.priority) + ",\"requeue\":";
  out += q.requeue ? "true" : "false";
  out += ",\"dependencies\":[";
  for (std::size_t i = 0; i < q.dependencies.size(); ++i) {
    if (i) out.push_back(',');
    out += '"' + std::to_string(q.dependencies[i]) + '"';
  }
  out += "],\"umask\":" + std::to_string(q.umask) + ",\"geometry\":";
  // Already JSON (the daemon wrote it from the protocol's object).
  out += q.geometry.empty() ? std::string("null") : q.geometry;
  out += "}";
}

}  // namespace

pg_submit_batcher::pg_submit_batcher(pg_shared& shared) : shared_(shared) {
  for (unsigned i = 0; i < shared_.options.committers; ++i) sessions_.push_back(std::make_unique<pg_session>(shared_));
  for (unsigned i = 0; i < shared_.options.committers; ++i) {
    committers_.emplace_back([this, i] { committer_loop(i); });
  }
}

pg_submit_batcher::~pg_submit_batcher() { stop(); }

void pg_submit_batcher::stop() noexcept {
  std::call_once(stop_once_, [this] {
    std::deque<pending_submit> unsent;
    {
      std::lock_guard lk(queue_mu_);
      stopping_ = true;
      unsent.swap(queue_);
    }
    queue_cv_.notify_all();
    // Committers finish the batch in hand (its callbacks run) and return.
    for (auto& t : committers_) t.join();
    for (auto& p : unsent) {
      try {
        throw store_unavailable("the scheduler is stopping: the job was not stored (submit it again)");
      } catch (...) {
        try {
          p.reject(std::current_exception());
        } catch (...) {
          // A callback that throws cannot stop the others from hearing.
        }
      }
    }
  });
}

void pg_submit_batcher::pending_submit::resolve(std::int64_t id, bool created) {
  if (done) {
    done(id, created, nullptr);
  } else {
    promise.set_value(id);
  }
}

void pg_submit_batcher::pending_submit::reject(std::exception_ptr e) {
  if (done) {
    done(0, false, e);
  } else {
    promise.set_exception(e);
  }
}

void pg_submit_batcher::enqueue(pending_submit p) {
  check_request(p.request);
  if (p.request.submit_token.empty()) p.request.submit_token = make_submit_token();
  {
    std::lock_guard lk(queue_mu_);
    if (stopping_) throw store_unavailable("the job store is shutting down");
    queue_.push_back(std::move(p));
  }
  queue_cv_.notify_one();
}

std::future<std::int64_t> pg_submit_batcher::submit_async(job_submission request) {
  pending_submit p{std::move(request), {}, {}};
  auto future = p.promise.get_future();
  enqueue(std::move(p));
  return future;
}

void pg_submit_batcher::submit_then(job_submission request, job_store::submit_callback done) {
  enqueue(pending_submit{std::move(request), {}, std::move(done)});
}

void pg_submit_batcher::committer_loop(unsigned index) {
  pg_session& s = *sessions_[index];
  std::vector<pending_submit> batch;
  for (;;) {
    {
      std::unique_lock lk(queue_mu_);
      queue_cv_.wait(lk, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and everything queued is done
      const std::size_t n = std::min(queue_.size(), shared_.options.max_batch);
      batch.clear();
      batch.reserve(n);
      for (std::size_t i = 0; i < n; ++i) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    commit_batch(s, batch);
  }
}

// The batch is one statement (jobs and their events through data-modifying
// CTEs) run in autocommit mode: one round trip that is also the COMMIT, so a
// batch costs one WAL flush and no BEGIN/COMMIT round trips. Any connection
// loss while it runs leaves the outcome unknown; it is then resolved by the
// batch's submit_tokens before anything is sent again.
std::vector<std::int64_t> pg_submit_batcher::insert_batch(pg_session& s, const std::vector<pending_submit>& batch,
                                                       std::vector<bool>& created) {
  created.assign(batch.size(), true);
  std::string json = "[";
  std::vector<std::string> tokens;
  tokens.reserve(batch.size());
  for (std::size_t i = 0; i < batch.size(); ++i) {
    if (i) json.push_back(',');
    append_batch_json(json, i, batch[i].request);
    tokens.push_back(batch[i].request.submit_token);
  }
  json.push_back(']');
  const std::string token_array = text_array_literal(tokens);

  // Ids in the batch's order, if every token is in the map.
  auto ids_in_order = [&](const std::unordered_map<std::string, std::int64_t>& by_token)
      -> std::optional<std::vector<std::int64_t>> {
    std::vector<std::int64_t> ids;
    ids.reserve(batch.size());
    for (const auto& p : batch) {
      auto it = by_token.find(p.request.submit_token);
      if (it == by_token.end()) return std::nullopt;
      ids.push_back(it->second);
    }
    return ids;
  };
  auto find_tokens = [&](pqxx::nontransaction& tx, std::unordered_map<std::string, std::int64_t>& by_token) {
    for (const auto& row : tx.exec_prepared("find_tokens", token_array)) {
      by_token.emplace(row["submit_token"].as<std::string>(), row["id"].as<std::int64_t>());
    }
  };

  const auto deadline = std::chrono::steady_clock::now() + shared_.options.reconnect_timeout;
  bool in_doubt = false;
  int rollbacks = 0;
  for (;;) {
    try {
      pqxx::connection& c = s.connect(deadline);
      pqxx::nontransaction tx(c);
      std::unordered_map<std::string, std::int64_t> by_token;
      if (in_doubt) {
        // All or nothing: if the batch landed, every token is there. If not,
        // running it again is safe anyway (ON CONFLICT on the token).
        find_tokens(tx, by_token);
        in_doubt = false;
        shared_.count_in_doubt();
        if (auto ids = ids_in_order(by_token)) return *ids;
        by_token.clear();
      }
      if (shared_.hooks.before_commit) shared_.hooks.before_commit(s.backend_pid());
      bool committed = false;
      try {
        for (const auto& row : tx.exec_prepared("submit_batch", json)) {
          by_token.emplace(row["submit_token"].as<std::string>(), row["id"].as<std::int64_t>());
        }
        committed = true;
        const auto& fake_in_doubt = shared_.hooks.fake_in_doubt_after_commit;
        if (fake_in_doubt && fake_in_doubt()) throw commit_unknown{};
        // Tokens that existed already (a client's retry): their jobs' ids.
        if (by_token.size() < batch.size()) {
          for (std::size_t i = 0; i < batch.size(); ++i) {
            created[i] = by_token.count(batch[i].request.submit_token) != 0;
          }
          find_tokens(tx, by_token);
        }
      } catch (const pqxx::broken_connection&) {
        throw commit_unknown{};
      } catch (const pqxx::in_doubt_error&) {
        throw commit_unknown{};
      } catch (const pqxx::transaction_rollback&) {
        if (committed || !s.is_open()) throw commit_unknown{};
        throw;
      } catch (const pqxx::sql_error& e) {
        if (committed || !s.is_open() || is_connection_state(e.sqlstate())) throw commit_unknown{};
        throw;  // refused: the statement, hence the whole batch, rolled back
      }
      auto ids = ids_in_order(by_token);
      if (!ids) throw store_error("a submitted job vanished after its commit");
      return *ids;
    } catch (const commit_unknown&) {
      s.drop();
      in_doubt = true;
    } catch (const pqxx::broken_connection&) {
      s.drop();  // lost while resolving: still in doubt if we were
    } catch (const pqxx::transaction_rollback&) {
      // A deadlock between two committers inserting the same token: retry.
      if (++rollbacks > 20) throw;
    } catch (const pqxx::sql_error& e) {
      if (s.is_open() && !is_connection_state(e.sqlstate())) throw;
      s.drop();
    }
    shared_.check_retry(deadline);
  }
}

void pg_submit_batcher::commit_batch(pg_session& s, std::vector<pending_submit>& batch) {
  try {
    std::vector<bool> created;
    const std::vector<std::int64_t> ids = insert_batch(s, batch, created);
    shared_.count_batch(batch.size());
    for (std::size_t i = 0; i < batch.size(); ++i) batch[i].resolve(ids[i], created[i]);
  } catch (const store_unavailable&) {
    for (auto& p : batch) p.reject(std::current_exception());
  } catch (const std::exception& e) {
    if (batch.size() > 1) {
      // The database refused something in the batch (validation should have
      // caught it): commit each job on its own so only the culprit fails.
      for (auto& p : batch) {
        std::vector<pending_submit> one;
        one.push_back(std::move(p));
        commit_batch(s, one);
      }
      return;
    }
    const std::string what = e.what();
    try {
      throw store_error("the database refused job " + batch[0].request.submit_token + ": " + what);
    } catch (...) {
      batch[0].reject(std::current_exception());
    }
  }
}

}  // namespace aqs::store
