// zaya: one binary, one subcommand per file in src/cli/.
#include <cstdio>

int main(int argc, char** argv) {
  std::fprintf(stderr, "zaya: no subcommands yet\n");
  return 1;
}
