// The Llama decoder of duet/llm.h split in pipeline stages over the ranks of an MPI run: the
// runner that `duet-llama --distributed` and the C API's distributed duet_llm give
// llm::ModelOptions::runner (docs/distributed.md). Every rank opens the same file (its own copy,
// or a shared disk) with the same options; each builds the decoder's structure alone and reads
// only its own stage's weights; rank 0 generates, the others serve its runs.
#pragma once

#include <string>

#include "duet/dist/engine.h"
#include "duet/dist/transport.h"
#include "duet/gguf.h"
#include "duet/llm.h"

namespace duet::dist {

// What makes one GGUF file another without reading its weights: its metadata, its tensor table
// and the bytes of its norms' weights (a fine-tune of the same shapes changes them too). The
// ranks compare it at start.
std::string model_identity(const GgufFile& file);

// A runner factory for llm::ModelOptions::runner: the decoder's stages over the ranks of
// `transport` (a collective: every rank's Generator::open calls it). `every_rank`: a stage on
// every rank even where fewer are estimated faster. `*stages` receives the engine the runner
// wraps: rank 0 calls its finish() when done, the other ranks its serve(). `transport` and
// `stages` must outlive the Generator.
decltype(llm::ModelOptions::runner) llm_runner(Transport& transport, bool every_rank,
                                               DistributedEngine** stages);

}  // namespace duet::dist
