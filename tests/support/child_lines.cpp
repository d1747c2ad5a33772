#include "support/child_lines.h"

#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

extern char** environ;

namespace duet::test_support {

ChildLines run_self(const std::string& env, const std::vector<std::string>& args, int timeout_s) {
  ChildLines out;
  int fds[2];
  if (pipe(fds) != 0) {
    out.failure = std::string("pipe: ") + std::strerror(errno);
    return out;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, fds[0]);
  posix_spawn_file_actions_addclose(&actions, fds[1]);

  std::vector<std::string> envs = {env};
  for (char** e = environ; *e; ++e) envs.emplace_back(*e);
  std::vector<char*> envp, argv;
  for (std::string& e : envs) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::string self = "/proc/self/exe";
  std::vector<std::string> argv_s = args;
  argv_s.insert(argv_s.begin(), self);
  for (std::string& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);

  pid_t pid = 0;
  const int rc = posix_spawn(&pid, self.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    out.failure = std::string("cannot start the child: ") + std::strerror(rc);
    return out;
  }

  // Read until the child closes its output, then wait for its exit, all within one deadline.
  std::string text;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  auto ms_left = [&] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(deadline -
                                                                 std::chrono::steady_clock::now())
        .count();
  };
  bool open = true;
  while (open && ms_left() > 0) {
    pollfd p{fds[0], POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(ms_left())) <= 0) continue;
    char buf[4096];
    const ssize_t got = read(fds[0], buf, sizeof buf);
    if (got > 0)
      text.append(buf, static_cast<size_t>(got));
    else if (got == 0 || errno != EINTR)
      open = false;
  }
  close(fds[0]);
  int status = 0;
  pid_t done = 0;
  while ((done = waitpid(pid, &status, WNOHANG)) == 0 && ms_left() > 0) usleep(10000);
  if (done == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    out.failure = "no answer within " + std::to_string(timeout_s) + " s (killed)";
  } else if (done < 0) {
    out.failure = std::string("waitpid: ") + std::strerror(errno);
  } else if (WIFSIGNALED(status)) {
    out.failure = std::string("killed by signal ") + std::to_string(WTERMSIG(status)) + " (" +
                  strsignal(WTERMSIG(status)) + ")";
  } else if (WEXITSTATUS(status) != 0) {
    out.failure = "exited with status " + std::to_string(WEXITSTATUS(status));
  }

  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    out.lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

}  // namespace duet::test_support
