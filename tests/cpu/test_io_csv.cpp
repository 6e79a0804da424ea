// CSV: exact round trips, quoting, line endings, the x/y split, and every malformed field
// or row reported with the file, line and column.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "../support/io_files.hpp"
#include "tapeless/io/csv.hpp"

namespace {

using tl_test::expect_failure;

template <class T>
void round_trip() {
  tl_test::scratch_directory dir;
  using limits = std::numeric_limits<T>;
  const tl::csv_table<T> table{{"plain", "with,comma", "with \"quotes\"", "line\nbreak", ""},
                               2,
                               {T(0.1), limits::denorm_min(), limits::max(), limits::lowest(), T(-0.0), T(1) / T(3),
                                limits::min(), T(1e-7), T(123456789), T(-2.5)}};
  tl::save_csv(dir / "t.csv", table);
  const auto loaded = tl::load_csv<T>(dir / "t.csv");
  EXPECT_EQ(loaded.columns, table.columns);
  EXPECT_EQ(loaded.rows, 2u);
  ASSERT_EQ(loaded.values.size(), table.values.size());
  EXPECT_EQ(std::memcmp(loaded.values.data(), table.values.data(), table.values.size() * sizeof(T)), 0);  // bit-exact
  EXPECT_EQ(loaded(1, 4), T(-2.5));

  const tl::basic_matrix<T> samples(1, 1, std::vector<T>{T(42)});  // 1x1
  tl::save_csv(dir / "one.csv", {"y"}, samples);
  EXPECT_EQ(tl_test::read_bytes(dir / "one.csv"), "y\n42\n");
  EXPECT_EQ(tl::load_csv_xy<T>(dir / "one.csv", {"y"}, {"y"}).targets, samples);
  tl::save_csv(dir / "none.csv", {"a", "b"}, tl::basic_matrix<T>(2, 0));  // header only: zero rows
  EXPECT_EQ(tl::load_csv<T>(dir / "none.csv").rows, 0u);
}

TEST(Csv, RoundTripsFloatAndDoubleBitExactly) {
  round_trip<float>();
  round_trip<double>();
}

TEST(Csv, SplitsNamedColumnsIntoInputsAndTargets) {
  tl_test::scratch_directory dir;
  // A byte order mark, CRLF line endings, a quoted number, a '+' sign, an unused text
  // column, and blank lines at the end are all fine.
  tl_test::write_bytes(dir / "d.csv", "\xEF\xBB\xBFid,x1,\"x,2\",y\r\nfoo,0.5,1,-2.25\r\nbar,\"3\",+4,1e-3\r\n\r\n\n");
  const auto [x, y] = tl::load_csv_xy<double>(dir / "d.csv", {"x,2", "x1"}, {"y"});
  EXPECT_EQ(x, tl::basic_matrix<double>(2, 2, std::vector<double>{1, 0.5, 4, 3}));
  EXPECT_EQ(y, tl::basic_matrix<double>(1, 2, std::vector<double>{-2.25, 1e-3}));
  tl_test::write_bytes(dir / "semi.csv", "a;b\n1;2\n");
  EXPECT_EQ(tl::load_csv<float>(dir / "semi.csv", {.delimiter = ';'}).values, (std::vector<float>{1, 2}));
}

TEST(Csv, ReportsTheFileLineAndColumnOfEveryProblem) {
  tl_test::scratch_directory dir;
  const auto file = dir / "bad.csv";
  const std::pair<std::string, std::vector<std::string>> cases[] = {
      {"", {"is empty (a header row of column names is needed)"}},
      {"\n\n", {"is empty"}},
      {"a,b\n1,\n", {"line 2, column 2 ('b'): empty field"}},
      {"a,b\n1,2\n3\n", {"line 3 has 1 fields, the header has 2 columns"}},
      {"a,b\n1,2,3\n", {"line 2 has 3 fields, the header has 2 columns"}},
      {"a,b\n1,x\n", {"line 2, column 2 ('b'): 'x' is not a number"}},
      {"a,b\n1,1.5x\n", {"'1.5x' is not a number"}},
      {"a,b\n 1,2\n", {"line 2, column 1 ('a'): ' 1' is not a number"}},
      {"a,b\n1,0x10\n", {"'0x10' is not a number"}},
      {"a,b\n1,+-1\n", {"'+-1' is not a number"}},
      {"a,b\n1,2\r\n3,nan\n", {"line 3, column 2 ('b'): 'nan' is not finite"}},
      {"a,b\n1,-inf\n", {"'-inf' is not finite"}},
      {"a,b\n1,1e39\n", {"'1e39' is out of range for float"}},
      {"a,a\n1,2\n", {"line 1: column name 'a' appears twice"}},
      {"a,b\n1,\"2\n", {"line 2: a quoted field is never closed"}},
      {"a,b\n1,\"2\"x\n", {"line 2: unexpected text after a closing quote"}},
      {"a,b\n1,2\"\n", {"line 2: a quote inside an unquoted field"}},
      {"a,b\n1,2\n\n3,4\n", {"line 3 is empty"}},
      {"\"multi\nline\",b\n1,2\n3,z\n", {"line 4, column 2 ('b'): 'z' is not a number"}},  // lines count physically
      {"x,y\r1,2\r3,4\r", {"line 1: a carriage return without a line feed"}},  // once read as 4 odd names, 0 rows
  };
  for (const auto& [text, problems] : cases) {
    SCOPED_TRACE(text);
    tl_test::write_bytes(file, text);
    tl::csv_table<float> destination{{"keep"}, 1, {7.0f}};
    const auto before = destination.values;
    try {
      destination = tl::load_csv<float>(file);
      ADD_FAILURE() << "accepted";
    } catch (const tl::io_error& e) {
      EXPECT_NE(std::string(e.what()).find(file.string()), std::string::npos) << e.what();
      for (const auto& p : problems) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
    }
    EXPECT_EQ(destination.values, before);
    EXPECT_EQ(destination.columns, std::vector<std::string>{"keep"});
  }
  tl_test::write_bytes(file, "a,b\n1,nan\n");
  EXPECT_TRUE(std::isnan(tl::load_csv<double>(file, {.non_finite = tl::non_finite_values::allow}).values[1]));
  tl_test::write_bytes(file, "x,y\n1,2\n");
  expect_failure<tl::io_error>([&] { (void)tl::load_csv_xy<float>(file, {"x", "z"}, {"y"}); },
                               {file.string(), "has no column 'z' (its columns: 'x', 'y')"});
  expect_failure<tl::shape_error>([&] { (void)tl::load_csv_xy<float>(file, {}, {"y"}); },
                                  {file.string(), "at least one input column and one target column"});
  expect_failure<tl::io_error>([&] { (void)tl::load_csv<float>(dir / "absent.csv"); }, {"absent.csv", "cannot open"});
}

TEST(Csv, SaveChecksSizesAndKeepsThePreviousFileOnFailure) {
  tl_test::scratch_directory dir;
  const auto file = dir / "out.csv";
  expect_failure<tl::shape_error>([&] { tl::save_csv(file, {"a"}, tl::matrix(2, 3)); }, {file.string(), "1 column names for 2 features"});
  expect_failure<tl::shape_error>([&] { tl::save_csv(file, tl::csv_table<float>{{"a", "b"}, 2, {1, 2, 3}}); },
                                  {"2 rows of 2 columns need 4 values, the table has 3"});
  expect_failure<tl::io_error>([&] { tl::save_csv(file, tl::csv_table<float>{{"a", "a"}, 0, {}}); }, {"column name 'a' appears twice"});
  expect_failure<tl::io_error>([&] { tl::save_csv(file, tl::csv_table<float>{{}, 0, {}}); }, {"at least one column"});
  EXPECT_TRUE(dir.listing().empty());

  tl::save_csv(file, {"a"}, tl::matrix(1, 2, std::vector<float>{1, 2}));
  const std::string before = tl_test::read_bytes(file);
  int writes = 0;
  const tl::detail::write_fault fail_write = [&](tl::detail::write_step s) {
    return s == tl::detail::write_step::write && writes++ == 0;
  };
  expect_failure<tl::io_error>([&] { tl::detail::save_csv(file, tl::csv_table<float>{{"b"}, 1, {3}}, ',', fail_write); },
                               {file.string(), "writing failed"});
  EXPECT_EQ(tl_test::read_bytes(file), before);
  EXPECT_EQ(dir.listing(), std::vector<std::string>{"out.csv"});
}

}  // namespace
