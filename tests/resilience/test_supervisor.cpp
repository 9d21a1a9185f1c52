// zaya supervise's --launcher string split into words (resilience/supervisor.h split_words): blanks
// separate, single and double quotes group, a backslash escapes; an unbalanced quote is an error.
#include <gtest/gtest.h>

#include "resilience/supervisor.h"
#include "test_util.h"

using zaya::split_words;
using Words = std::vector<std::string>;

TEST(LauncherWords, SplitsOnBlanks) {
  EXPECT_EQ(split_words("mpirun -np 4"), (Words{"mpirun", "-np", "4"}));
  EXPECT_EQ(split_words("  srun\t--ntasks=8 \n"), (Words{"srun", "--ntasks=8"}));
  EXPECT_EQ(split_words(""), Words{});
}

TEST(LauncherWords, QuotesAndEscapes) {
  EXPECT_EQ(split_words("mpirun -x 'A=b c' --host \"n1,n2\""),
            (Words{"mpirun", "-x", "A=b c", "--host", "n1,n2"}));
  EXPECT_EQ(split_words("a\\ b 'it''s' \"say \\\"hi\\\"\" ''"),
            (Words{"a b", "its", "say \"hi\"", ""}));
  EXPECT_EQ(split_words("'single \\ stays'"), (Words{"single \\ stays"}));
}

TEST(LauncherWords, UnbalancedQuoteIsAnError) {
  zaya::test::expect_error([] { split_words("mpirun 'oops"); }, {"unbalanced ' quote"});
  zaya::test::expect_error([] { split_words("mpirun \"oops"); }, {"unbalanced \" quote"});
}
