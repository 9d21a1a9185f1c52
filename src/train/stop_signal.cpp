// The stop signals of a training run (stop_signal.h). The handler only stores the signal in a
// lock-free atomic and writes with write(2): both async-signal-safe.
#include "train/stop_signal.h"

#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstring>

namespace zaya {

namespace {

std::atomic<int> g_signal{0};
std::atomic<bool> g_announce{false};
static_assert(std::atomic<int>::is_always_lock_free);

void say(const char* text) {
  const ssize_t ignored = ::write(STDERR_FILENO, text, std::strlen(text));
  (void)ignored;
}

extern "C" void zaya_train_on_stop_signal(int sig) {
  int none = 0;
  if (!g_signal.compare_exchange_strong(none, sig)) {
    // The second signal: the user does not want to wait for the step to finish.
    say("\ntrain: second stop signal: aborting now (the newest complete checkpoint is kept)\n");
    ::_exit(128 + sig);
  }
  if (g_announce.load())
    say(sig == SIGINT ? "\ntrain: SIGINT: finishing this step, then saving a checkpoint "
                        "(Ctrl-C again aborts at once)\n"
                      : "\ntrain: SIGTERM: finishing this step, then saving a checkpoint\n");
}

}  // namespace

void install_stop_signals(bool announce) {
  g_announce.store(announce);
  struct sigaction sa {};
  sa.sa_handler = zaya_train_on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

int stop_signal_received() {
  return g_signal.load();
}

void clear_stop_signal() {
  g_signal.store(0);
}

const char* stop_signal_name(int sig) {
  switch (sig) {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    default:
      return "a signal";
  }
}

}  // namespace zaya
