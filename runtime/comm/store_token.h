#pragma once
// The job token every TCP store request carries (tcp_store.h), and where a rank gets it.
//
// A job must never open an unauthenticated TCP store: anyone who can reach MASTER_PORT could read
// the rendezvous values or plant keys that abort the job. So every launch path has a token
// without the user choosing one:
//   parlab's supervisor (`parlab train --nproc N`)  generates a fresh random token per launch and
//       hands it to its workers in PARLAB_STORE_TOKEN (the environment of a process is readable by
//       its owner only). Its workers meet in an owner-only file store; the token covers any TCP
//       store they open.
//   torchrun / srun (parlab does not launch)  resolve_store_token(), in this order:
//       1. PARLAB_STORE_TOKEN, when set and not empty (every rank must be given the same);
//       2. the file PARLAB_STORE_TOKEN_FILE names;
//       3. `<run dir>/store_token`.
//     For 2 and 3 the first rank to look creates the file (owner-only, 0600, random) and every
//     rank reads the same one, so ranks that share the file (one machine, or a run dir on a shared
//     filesystem) agree without any setup. A file that group or others may read, or that another
//     user owns, is refused: its token is no secret.
// Ranks on hosts that share no filesystem must be given PARLAB_STORE_TOKEN (or a token file each
// host holds a copy of); otherwise their tokens differ and the store turns them away by name.
#include <filesystem>
#include <string>

#include "runtime/comm/rendezvous.h"

namespace parlab::comm {

// 32 hex digits from the kernel's random source (getrandom(2)). Throws RuntimeError if it fails.
std::string random_store_token();

// The token in `file`; creates it first (0600, a random_store_token) when it does not exist,
// atomically, so concurrent ranks all read the one that won. Throws ConfigError (naming `what`,
// the variable or flag that chose the file) when the file is empty, readable by group or others,
// or owned by another user; RuntimeError when it cannot be read or written.
std::string read_or_create_token_file(const std::filesystem::path& file, const std::string& what);

// Fills env.store_token (and env.store_token_source, for messages) from the order above; `run_dir`
// empty skips step 3. Throws ConfigError naming PARLAB_STORE_TOKEN when no source gives a token.
void resolve_store_token(RendezvousEnv& env, const std::filesystem::path& run_dir);

// Where a run directory keeps the torchrun/srun job's token file.
std::filesystem::path store_token_path(const std::filesystem::path& run_dir);

}  // namespace parlab::comm
