#pragma once
// kernel_groups.hpp — the model's symbols in the groups of a kernel profile (`skbsim measure`,
// docs/measure.md "The kernel profile"), so that a run's time and a real kernel's profile compare
// group by group, and a preset can scale a group's calls (`group_scale:<group>`).
//
// A symbol's group is what measure::profile_group() gives its name: the same table of rules that
// sorts the kernel's samples, so `skb_copy_datagram_iovec` is "user_copy" on both sides and
// `csum_partial_copy_generic` "checksum". The few symbols the model names as 2.6.20 did, where the
// 6.x function falls elsewhere, are sorted by the 6.x name (`sys_sendto` as `__sys_sendto`,
// `sk_add_backlog` as `tcp_add_backlog`). Drivers no rule names (loopback, e1000, etun, venet)
// are "other" on both sides. Groups the model has no symbol in ("irqs_off_deferred",
// "locking", ...) are time it does not model.

#include <map>
#include <string>
#include <string_view>

#include "skbsim/symbols.hpp"

namespace skbsim::sim {

struct HostResult;

// The kernel-profile group of one model symbol.
std::string_view kernel_group(Sym s);
// Whether `group` is a group of busy kernel work a kernel profile reports (not "idle",
// "tracing"; "user" and "irqs_off_deferred" included: the reference may hold them).
bool is_busy_group(std::string_view group);
// Whether at least one model symbol falls in `group`.
bool model_has_group(std::string_view group);

// A host's busy time by kernel-profile group, in µs per KB of goodput: the group's share of the
// host's busy time times its service demand (the same arithmetic as a kernel profile's share
// times the measured service demand). Groups the model spent nothing in are left out.
std::map<std::string, double> group_us_per_kb(const HostResult& h);

// Below this a kernel profile's group (us/KB) rests on a few dozen samples of a traced run, or on
// none: too few for a relative error to mean anything. `validate` compares such a group
// absolutely and `calibrate` leaves it out of a fit.
inline constexpr double kProfileGroupRelativeFloorUsPerKb = 0.02;

}  // namespace skbsim::sim
