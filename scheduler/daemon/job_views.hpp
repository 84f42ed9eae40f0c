// job_views: the answers to what clients read: fjobs (list_jobs), fnodes
// (list_nodes) and a job's history (job_history).
//
// The rule it keeps: it reads and never writes. list_jobs and job_history
// run on the session thread that received them and read the store on the
// pipeline's readers and the access view (thread-safe); list_nodes runs on
// the strand (the routing table posts it) and reads the core and the nodes
// part there. It owns nothing but the page size. Called by the routing
// table only.
#pragma once

#include <cstdint>
#include <memory>

#include "core/scheduler.hpp"
#include "daemon/access_view.hpp"
#include "daemon/job_intake.hpp"
#include "daemon/node_manager.hpp"
#include "daemon/write_pipeline.hpp"
#include "daemon_base/dispatcher.hpp"
#include "protocol/messages.hpp"

namespace aqs::daemon {

class job_views {
public:
  using conn_ptr = std::shared_ptr<connection>;

  // At most `list_page` jobs in one list_jobs reply.
  job_views(core::scheduler& sched, write_pipeline& pipe, job_intake& intake, node_manager& nodes, access_view& view,
            std::int64_t list_page);

  void handle_list_jobs(const conn_ptr& c, const protocol::list_jobs& m);
  void handle_list_nodes(const conn_ptr& c, const protocol::list_nodes& m);
  void handle_job_history(const conn_ptr& c, const protocol::job_history& m);

private:
  job_table& jobs() noexcept { return intake_.jobs(); }
  std::vector<core::node_span> spans() const { return view_.spans(); }

  core::scheduler& sched_;
  write_pipeline& pipe_;
  job_intake& intake_;
  node_manager& nodes_;
  access_view& view_;
  std::int64_t list_page_;
};

}  // namespace aqs::daemon
