#include "runtime/model/model.h"

#include <string>

#include "strategy/errors.h"

namespace parlab::model {

namespace {

[[noreturn]] void no_slices(const Model& m) {
  throw RuntimeError("the " + std::string(m.device_name()) +
                     " model holds whole layers: tensor-parallel slices are not implemented there");
}

}  // namespace

void Model::tp_finish_forward(int, MicrobatchState&, int64_t, int64_t) const { no_slices(*this); }
void Model::tp_finish_backward(int, MicrobatchState&, int64_t, int64_t) { no_slices(*this); }

}  // namespace parlab::model
