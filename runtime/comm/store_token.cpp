#include "runtime/comm/store_token.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace parlab::comm {
namespace {

std::string errno_text() { return std::strerror(errno); }

// Writes a fresh token to a private temporary file and links it to `file`: link(2) fails when
// `file` exists, so of several ranks racing here exactly one token lands, and no rank can read a
// half-written one.
void create_token_file(const std::filesystem::path& file) {
  const std::string tmp =
      file.string() + ".tmp." + std::to_string(::getpid()) + "." + random_store_token().substr(0, 8);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) throw RuntimeError("cannot create the store token file " + tmp + ": " + errno_text());
  const std::string token = random_store_token() + "\n";
  const bool written = ::write(fd, token.data(), token.size()) == static_cast<ssize_t>(token.size());
  const bool closed = ::close(fd) == 0;
  const int linked = written && closed ? ::link(tmp.c_str(), file.c_str()) : -1;
  const int link_errno = errno;
  ::unlink(tmp.c_str());
  if (!written || !closed) throw RuntimeError("cannot write the store token file " + tmp);
  if (linked != 0 && link_errno != EEXIST)
    throw RuntimeError("cannot create the store token file " + file.string() + ": " + std::strerror(link_errno));
}

}  // namespace

std::string random_store_token() {
  unsigned char bytes[16];
  std::size_t got = 0;
  while (got < sizeof bytes) {
    const ssize_t n = ::getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw RuntimeError("cannot draw a random store token: " + errno_text());
    got += static_cast<std::size_t>(n);
  }
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned char b : bytes) {
    out += hex[b >> 4];
    out += hex[b & 15];
  }
  return out;
}

std::string read_or_create_token_file(const std::filesystem::path& file, const std::string& what) {
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0) {
    if (errno != ENOENT) throw RuntimeError("cannot read the store token file " + file.string() + ": " + errno_text());
    if (file.has_parent_path()) {
      std::error_code ec;
      std::filesystem::create_directories(file.parent_path(), ec);
    }
    create_token_file(file);
    if (::stat(file.c_str(), &st) != 0)
      throw RuntimeError("cannot read the store token file " + file.string() + ": " + errno_text());
  }
  const std::string where = what + " (" + file.string() + ")";
  if (!S_ISREG(st.st_mode)) throw ConfigError(where, "not a regular file", "a 0600 file holding the job's token");
  if (st.st_uid != ::getuid())
    throw ConfigError(where, "owned by uid " + std::to_string(st.st_uid),
                      "must be owned by this user (uid " + std::to_string(::getuid()) + ")");
  if ((st.st_mode & 077) != 0) {
    std::ostringstream mode;
    mode << "mode 0" << std::oct << (st.st_mode & 0777);
    throw ConfigError(where, mode.str(), "group and others may read it, so its token is no secret: chmod 600 it");
  }
  std::ifstream in(file);
  std::string token;
  if (!in || !std::getline(in, token)) throw RuntimeError("cannot read the store token file " + file.string());
  while (!token.empty() && (token.back() == '\r' || token.back() == ' ')) token.pop_back();
  if (token.empty()) throw ConfigError(where, "an empty first line", "the job's token on the first line");
  return token;
}

std::filesystem::path store_token_path(const std::filesystem::path& run_dir) { return run_dir / "store_token"; }

void resolve_store_token(RendezvousEnv& env, const std::filesystem::path& run_dir) {
  if (!env.store_token.empty()) return;  // PARLAB_STORE_TOKEN
  if (!env.store_token_file.empty()) {
    env.store_token = read_or_create_token_file(env.store_token_file, "PARLAB_STORE_TOKEN_FILE");
    env.store_token_source = "PARLAB_STORE_TOKEN_FILE " + env.store_token_file;
    return;
  }
  if (!run_dir.empty()) {
    const std::filesystem::path file = store_token_path(run_dir);
    env.store_token = read_or_create_token_file(file, "--run-dir token file");
    env.store_token_source = "the run directory's token file " + file.string();
    return;
  }
  throw ConfigError("PARLAB_STORE_TOKEN", "<unset>",
                    "the TCP rendezvous store needs a per-job token: set PARLAB_STORE_TOKEN (the same on every rank) "
                    "or PARLAB_STORE_TOKEN_FILE (a 0600 file every rank reads)");
}

}  // namespace parlab::comm
