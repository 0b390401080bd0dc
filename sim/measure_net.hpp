#pragma once
// measure_net.hpp — the networks `skbsim measure` builds: its own network namespaces joined by
// veth pairs, in the three topologies of the scenarios, with the veth features of a variant.
//
//   direct:   [client c0] ==veth== [s0 server]
//   forward:  [client c0] ==veth== [hc host ip_forward=1 hs] ==veth== [s0 server]
//   bridge:   [client c0] ==veth== [hc host br0 hs] ==veth== [s0 server]   (hc, hs ports of br0)
//
// Namespaces are named "skbsim-<pid>-client|host|server". Every veth is created inside them
// (`ip -n NS link add ... peer ... netns NS2`): the root namespace's interfaces and routes are
// never touched, and deleting a namespace removes its veth ends and bridge. A Lab removes its
// namespaces when destroyed, after killing whatever still runs in them.
//
// A NetPlan is plain data (names, addresses, routes) so the scenario writer uses the same
// addresses and the tests can check the plan without root.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/measure_host.hpp"
#include "sim/measure_process.hpp"

namespace skbsim::sim::measure {

enum class Topology : std::uint8_t { kDirect, kForward, kBridge };
enum class Variant : std::uint8_t { kOn, kOff, kTsoOff, kSgOff, kCsumOff };

std::string_view topology_name(Topology t);
std::string_view variant_name(Variant v);
std::optional<Topology> topology_from_name(std::string_view s);
std::optional<Variant> variant_from_name(std::string_view s);
// The `ethtool -K DEV ...` arguments of a variant (empty for `on`, the defaults).
std::vector<std::string> variant_ethtool_args(Variant v);

enum class Role : std::uint8_t { kClient, kHost, kServer };
std::string_view role_name(Role r);

struct PlanDevice {
  std::string ifname;         // in its namespace, e.g. "skbm-c0" (unique, for the tracepoints)
  std::string scenario_name;  // in the scenario file, e.g. "M/c0"
  Role ns = Role::kClient;
  std::string peer;     // the other end's ifname ("" for the bridge)
  bool veth = true;     // false: the bridge
  std::string address;  // "10.202.1.2/24" or ""
  std::string master;   // the bridge it is a port of, or ""
};

struct PlanRoute {
  Role ns = Role::kClient;
  std::string to;   // "default" or a prefix
  std::string via;  // gateway or "" (on-link)
  std::string dev;  // ifname
};

struct NetPlan {
  Topology topology = Topology::kDirect;
  std::vector<Role> namespaces;  // the roles this topology uses
  std::vector<PlanDevice> devices;
  std::vector<PlanRoute> routes;  // beyond the connected /24s
  bool ip_forward = false;        // in the host namespace
  std::string server_address;     // where the client connects
  // Pinned on the routes between client and server (Lab::pin_congestion_control); "" pins
  // nothing.
  std::string congestion_control;
  const PlanDevice& device(std::string_view ifname) const;
  // The addressed veth end in the namespace of `r` (client or server); MeasureError if none.
  const PlanDevice& end_of(Role r) const;
};

// The --congestion-control error for an algorithm the kernel refused (`why`: who said so), with
// the ones it has (tcp_available_congestion_control).
RefusedFlag refused_congestion_control(const std::string& name, const std::string& why);

// The plan of `t`. Addresses are private (10.201-203.x.y), different per topology.
NetPlan plan_for(Topology t);

// The namespace name of `role` for the process `pid`: "skbsim-<pid>-client".
std::string namespace_name(int pid, Role role);

// What the measurement needs from ip, ethtool, sysctl, ss, iperf3 (absolute paths).
struct Tools {
  std::string ip;
  std::string ethtool;
  std::string sysctl;
  std::string ss;
  std::string iperf3;
  std::string bpftrace;  // "" when not installed
};

// ethtool -k output -> feature name -> on.
std::map<std::string, bool> parse_ethtool_features(const std::string& text);
// The NETIF_F_* names (the scenario format's, 6.x) of a veth with these ethtool features; always
// with NETIF_F_LLTX (6.x veth sets dev->lltx, which ethtool no longer shows).
std::vector<std::string> netif_features(const std::map<std::string, bool>& ethtool);
// The ethtool features recorded in measurement files (the ones the model has a flag for, and
// their parents).
const std::vector<std::string>& recorded_ethtool_features();

class Lab {
 public:
  // Creates the namespaces of `plan` for this process, the veths, the bridge, addresses, routes
  // and ip_forward, brings everything up. Throws MeasureError (having removed what it made) or
  // Interrupted. Requires: none of the namespaces exists (checked by the caller).
  Lab(NetPlan plan, const Tools& tools, ScratchDir& scratch);
  Lab(const Lab&) = delete;
  Lab& operator=(const Lab&) = delete;
  ~Lab();  // kills what runs in its namespaces, deletes them; never throws

  const NetPlan& plan() const { return plan_; }
  std::string ns(Role r) const { return namespace_name(pid_, r); }
  // argv prefix that runs a program inside the namespace of `r`: ip netns exec NS.
  std::vector<std::string> in(Role r) const;

  // With a bridge: net.bridge.bridge-nf-call-iptables as the namespace had it before the Lab set
  // it (and ip6tables, arptables) to 0 — br_netfilter, when loaded, would run every bridged frame
  // through the IP hooks; "" when br_netfilter is not loaded.
  const std::string& bridge_nf_default() const { return bridge_nf_default_; }

  // ethtool -K on every veth end.
  void apply(Variant v);
  // ethtool -k of every veth end, by ifname.
  std::map<std::string, std::map<std::string, bool>> features();
  // Waits until a TCP connection attempt from the client namespace to the server address gets an
  // answer (a RST from the closed port 9 is one): the path forwards. A fresh bridge can drop the
  // first frames, and iperf3's SYN then waits out the 1 s initial RTO inside the timed run.
  // Returns the seconds waited; throws MeasureError after 10 s without an answer.
  double wait_until_connected();
  // sysctl -n NAME inside the namespace of `r`; "" when the key does not exist there.
  std::string sysctl(Role r, const std::string& name);
  // /proc/net/snmp's Tcp counters and /proc/net/netstat's TcpExt ones inside the role's namespace.
  TcpCounters tcp_counters(Role r);

 private:
  void build();
  void pin_congestion_control();
  void destroy() noexcept;
  NetPlan plan_;
  const Tools& tools_;
  ScratchDir& scratch_;
  int pid_;
  std::vector<std::string> created_;  // namespaces, in creation order
  std::string bridge_nf_default_;
};

// Namespaces named skbsim-* that exist now (from /run/netns).
std::vector<std::string> existing_skbsim_namespaces();

// Whether this process runs in a chroot (nothing is mounted at its "/", or there is no /proc):
// `ip netns add` may still work there, but entering a namespace (`ip -n`, which remounts
// /sys) fails, and the /run/netns mount it makes leaks into the host.
bool in_chroot();

}  // namespace skbsim::sim::measure
