#pragma once
// model_env.hpp — the smallest world skb operations run in: one kernel model, a pool, a ledger
// and the OpCtx that ties them together (tests and benchmarks of the core share it).

#include "skbsim/skb_ops.hpp"

namespace skbsim::testing {

struct ModelEnv {
  explicit ModelEnv(KernelVersion v) : k(KernelModel::get(v)), ctx(k, pool, ledger) {}
  ModelEnv(const ModelEnv&) = delete;
  ModelEnv& operator=(const ModelEnv&) = delete;
  const KernelModel& k;
  SkbPool pool;
  Ledger ledger;
  OpCtx ctx;
};

}  // namespace skbsim::testing
