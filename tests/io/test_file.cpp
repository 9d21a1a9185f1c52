// The one way files are written (io/file.h): write_file and FileWriter put the whole file under its
// name or leave the old one untouched (atomic), write in place when asked, remove an unfinished
// atomic writer's temporary, and name the path in every error; read_text_file reads back what was
// written.
#include <filesystem>
#include <string>

#include "io/file.h"
#include "test_util.h"

namespace zaya {
namespace {

namespace fs = std::filesystem;
using test::expect_error;
using test::ScratchDir;

TEST(WriteFile, ReplacesAtomicallyAndLeavesNoTemporary) {
  ScratchDir dir;
  const std::string path = dir / "config.json";
  write_file(path, "first\n");
  write_file(path, "second\n");
  EXPECT_EQ(read_text_file(path, "test file"), "second\n");
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  write_file(path, "");  // an empty file is a file
  EXPECT_TRUE(fs::exists(path));
  EXPECT_EQ(fs::file_size(path), 0u);
}

TEST(WriteFile, InPlaceWritesTheNameItself) {
  ScratchDir dir;
  const std::string path = dir / "trainer_state.json";
  write_file(path, "{}\n", {.atomic = false});
  EXPECT_EQ(read_text_file(path, "test file"), "{}\n");
  write_file(path, "x", {.atomic = false, .fsync = false});
  EXPECT_EQ(read_text_file(path, "test file"), "x");
}

TEST(WriteFile, AFailedWriteNamesThePathAndKeepsTheOldFile) {
  ScratchDir dir;
  expect_error([&] { write_file(dir / "no/such/dir/f", "x"); },
               {"no/such/dir/f.tmp", "cannot create"});
  if (fs::exists("/dev/full"))  // ENOSPC on the flush (in place: /dev/full stays, of course)
    expect_error([] { write_file("/dev/full", std::string(1 << 16, 'x'), {.atomic = false}); },
                 {"/dev/full", "failed"});
  const std::string path = dir / "kept";
  write_file(path, "old");
  fs::create_directory(path + ".tmp");  // the temporary cannot be created: nothing changes
  expect_error([&] { write_file(path, "new"); }, {path + ".tmp"});
  EXPECT_EQ(read_text_file(path, "test file"), "old");
}

TEST(FileWriter, PiecesAndSeekCommitAsOneFile) {
  ScratchDir dir;
  const std::string path = dir / "shard.bin";
  FileWriter w(path);
  EXPECT_EQ(w.writing(), path + ".tmp");
  w.write("....", 4);
  w.write("payload", 7);
  EXPECT_FALSE(fs::exists(path)) << "visible before commit";
  w.seek(0);
  w.write("HEAD", 4);
  w.commit();
  EXPECT_EQ(read_text_file(path, "test file"), "HEADpayload");
  EXPECT_FALSE(fs::exists(path + ".tmp"));
}

TEST(FileWriter, DestroyedWithoutCommitRemovesWhatItWrote) {
  ScratchDir dir;
  const std::string path = dir / "partial.bin";
  write_file(path, "previous");
  {
    FileWriter w(path);
    w.write("half", 4);
  }
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  EXPECT_EQ(read_text_file(path, "test file"), "previous");
  {  // in place: what was written stays for the caller to discard
    FileWriter w(dir / "fresh.bin", {.atomic = false});
    w.write("x", 1);
  }
  EXPECT_TRUE(fs::exists(dir / "fresh.bin"));
}

TEST(FsyncPath, MissingPathsAreErrors) {
  ScratchDir dir;
  fsync_path(dir.path, /*directory=*/true);
  expect_error([&] { fsync_path(dir / "missing", false); }, {"missing", "cannot open for fsync"});
}

}  // namespace
}  // namespace zaya
