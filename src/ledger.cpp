#include "skbsim/ledger.hpp"

namespace skbsim {

void LedgerCell::add(const LedgerCell& o) noexcept {
  calls += o.calls;
  copied += o.copied;
  summed += o.summed;
  fused += o.fused;
  page_refs += o.page_refs;
  allocs += o.allocs;
  alloc_bytes += o.alloc_bytes;
  frees += o.frees;
  free_bytes += o.free_bytes;
  handovers += o.handovers;
  cost_ps += o.cost_ps;
}

void LedgerCell::subtract(const LedgerCell& o) noexcept {
  calls -= o.calls;
  copied -= o.copied;
  summed -= o.summed;
  fused -= o.fused;
  page_refs -= o.page_refs;
  allocs -= o.allocs;
  alloc_bytes -= o.alloc_bytes;
  frees -= o.frees;
  free_bytes -= o.free_bytes;
  handovers -= o.handovers;
  cost_ps -= o.cost_ps;
}

LedgerCell Ledger::total() const noexcept {
  LedgerCell t;
  for (const auto& c : cells_) {
    t.add(c);
  }
  return t;
}

void Ledger::add(const Ledger& other) noexcept {
  for (std::size_t i = 0; i < kSymCount; ++i) {
    cells_[i].add(other.cells_[i]);
  }
  pending_ps_ += other.pending_ps_;
}

void Ledger::clear() noexcept {
  cells_ = {};
  pending_ps_ = 0;
  last_ps_ = 0;
}

}  // namespace skbsim
