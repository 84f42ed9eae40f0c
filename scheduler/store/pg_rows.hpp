// pg_rows: the store's records as PostgreSQL rows: one description per record
// (field, column name, how it is read) that both builds the SELECT column
// lists and reads result rows by column name.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <pqxx/pqxx>

#include "core/job_state.hpp"
#include "core/processor_set.hpp"
#include "store/records.hpp"

namespace aqs::store {

// One column of a record: its name in the table and how its value goes into
// the record.
template <class Record>
struct pg_column {
  const char* name;
  void (*read)(const pqxx::field& value, Record& into);
};

// The columns of each record, in SELECT order. A new field of a record is a
// line here (and, for a table, a migration); nothing else reads columns.
std::span<const pg_column<job_summary>> summary_columns();
// What get_job reads beyond the summary: the bulky parts of the request.
std::span<const pg_column<job_record>> record_columns();
std::span<const pg_column<history_event>> event_columns();
std::span<const pg_column<node_record>> node_columns();

// "a, b, c": a SELECT list of the columns.
template <class Record>
std::string column_list(std::span<const pg_column<Record>> columns) {
  std::string out;
  for (const auto& c : columns) {
    if (!out.empty()) out += ", ";
    out += c.name;
  }
  return out;
}

// Reads records out of one result by column name: the names are looked up
// once per result, then each row is walked with one iterator (indexing a row
// makes a field that copies the result's shared pointers, and those atomic
// copies were a third of aqsd's time listing 100,000 jobs).
template <class Record>
class pg_row_reader {
public:
  pg_row_reader(const pqxx::result& r, std::span<const pg_column<Record>> columns) : columns_(columns) {
    index_.reserve(columns.size());
    for (const auto& c : columns) index_.push_back(static_cast<long>(r.column_number(c.name)));
  }
  void read(const pqxx::row& row, Record& into) const {
    auto it = row.begin();
    long at = 0;
    for (std::size_t i = 0; i < columns_.size(); ++i) {
      it += index_[i] - at;
      at = index_[i];
      columns_[i].read(*it, into);
    }
  }

private:
  std::span<const pg_column<Record>> columns_;
  std::vector<long> index_;
};

// Every row of a result as records.
std::vector<job_summary> read_summaries(const pqxx::result& r);
void append_summaries(const pqxx::result& r, std::vector<job_summary>& out);
job_record read_record(const pqxx::result& r, std::size_t row = 0);
std::vector<history_event> read_events(const pqxx::result& r);
std::vector<node_record> read_nodes(const pqxx::result& r);

// Values of single columns, for the statements that read one or two.
time_point micros(const pqxx::field& f);
core::job_state state_of(const pqxx::field& f);
core::processor_set map_of(const pqxx::field& f);
std::optional<std::string> opt_text(const pqxx::field& f);

}  // namespace aqs::store
