#pragma once
// symbols.hpp — the kernel functions skbsim charges work to.
//
// Every cost the model records is filed under one of these symbols, named exactly as the kernel
// function that does the work itself (self time, as `perf report` without children shows it). The
// ledger is therefore a profile: `pskb_expand_head` carries the memcpy it does inline, `__kmalloc`
// the allocation it asks for, `csum_partial` the bytes a software checksum runs over.
//
// Kernel-version differences in naming are not modelled here: where 2.6.20 and 6.x call the same
// work by different names (tcp_transmit_skb / __tcp_transmit_skb) the 2.6.20 name is used and the
// 6.x one is given in the comment; `symbol_name()` returns the version-neutral name.
//
// Group is the coarse class the plots stack by (copy, checksum, skb management, protocol, device,
// memory); it is never used for costing.

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace skbsim {

enum class SymGroup : std::uint8_t { kCopy, kChecksum, kSkb, kProtocol, kDevice, kMemory, kOther };

// X(enumerator, kernel symbol, group)
#define SKBSIM_SYMBOLS(X)                                                                   \
  /* skb management: net/core/skbuff.c, include/linux/skbuff.h */                           \
  X(kAllocSkb, "__alloc_skb", kSkb)                                                         \
  X(kNetdevAllocSkb, "__netdev_alloc_skb", kSkb)                                            \
  X(kSkbReserve, "skb_reserve", kSkb)                                                       \
  X(kSkbPut, "skb_put", kSkb)                                                               \
  X(kSkbPush, "skb_push", kSkb)                                                             \
  X(kSkbPull, "skb_pull", kSkb)                                                             \
  X(kSkbTrim, "skb_trim", kSkb)                                                             \
  X(kSkbClone, "skb_clone", kSkb)                                                           \
  X(kSkbCopy, "skb_copy", kSkb)                                                             \
  X(kSkbCopyBits, "skb_copy_bits", kCopy)                                                   \
  X(kPskbCopy, "pskb_copy", kSkb)                                                           \
  X(kPskbExpandHead, "pskb_expand_head", kSkb)                                              \
  X(kSkbCow, "skb_cow", kSkb)                                                               \
  X(kSkbCowHead, "skb_cow_head", kSkb)                                                      \
  X(kSkbHeaderRelease, "skb_header_release", kSkb)                                          \
  X(kSkbGet, "skb_get", kSkb)                                                               \
  X(kSkbUnshare, "skb_unshare", kSkb)                                                       \
  X(kSkbShareCheck, "skb_share_check", kSkb)                                                \
  X(kPskbPullTail, "__pskb_pull_tail", kSkb)                                                \
  X(kSkbStoreBits, "skb_store_bits", kCopy)                                                 \
  X(kSkbFillPageDesc, "skb_fill_page_desc", kSkb)                                           \
  X(kSkbAddRxFrag, "skb_add_rx_frag", kSkb)                                                 \
  X(kSkbSetOwnerW, "skb_set_owner_w", kSkb)                                                 \
  X(kSkbOrphan, "skb_orphan", kSkb)                                                         \
  X(kSockWfree, "sock_wfree", kSkb)                                                         \
  X(kSockRfree, "sock_rfree", kSkb)                                                         \
  X(kSkbSetOwnerR, "skb_set_owner_r", kSkb)                                                 \
  X(kKfreeSkb, "kfree_skb", kSkb)                                                           \
  X(kConsumeSkb, "consume_skb", kSkb)                                                       \
  X(kKfreeSkbFree, "__kfree_skb", kSkb)                                                     \
  /* 6.x: a consumed skb handed back to the CPU that allocated it (net/core/skbuff.c) */     \
  X(kSkbAttemptDeferFree, "skb_attempt_defer_free", kSkb)                                   \
  /* its kick at half the list: an IPI raises NET_RX on the allocating CPU (net/core/dev.c) */ \
  X(kKickDeferListPurge, "kick_defer_list_purge", kSkb)                                     \
  X(kSkbSegment, "skb_segment", kSkb)                                                       \
  X(kSkbScrubPacket, "skb_scrub_packet", kSkb)                                              \
  X(kSkbTryCoalesce, "skb_try_coalesce", kSkb)                                              \
  X(kSkbSplit, "skb_split", kSkb)                                                           \
  /* memory: mm/slab.c (2.6.20), mm/slub.c (6.x), mm/page_alloc.c */                       \
  X(kKmemCacheAlloc, "kmem_cache_alloc", kMemory)                                           \
  X(kKmemCacheFree, "kmem_cache_free", kMemory)                                             \
  X(kKmalloc, "__kmalloc", kMemory)                                                         \
  X(kKfree, "kfree", kMemory)                                                               \
  X(kAllocPages, "alloc_pages", kMemory)                                                    \
  X(kGetPage, "get_page", kMemory)                                                          \
  X(kPutPage, "put_page", kMemory)                                                          \
  /* copies: arch/x86/lib (copy_from_user is __copy_from_user_ll on i386, */                \
  /* copy_user_generic on x86_64) */                                                        \
  X(kCopyFromUser, "copy_from_user", kCopy)                                                 \
  X(kCopyToUser, "copy_to_user", kCopy)                                                     \
  X(kMemcpy, "memcpy", kCopy)                                                               \
  X(kSkbCopyDatagramIovec, "skb_copy_datagram_iovec", kCopy)                                \
  /* checksums: arch/x86/lib/checksum*.S, net/core/skbuff.c, net/core/dev.c */              \
  X(kCsumPartial, "csum_partial", kChecksum)                                                \
  X(kCsumPartialCopyGeneric, "csum_partial_copy_generic", kChecksum)                        \
  X(kSkbChecksum, "skb_checksum", kChecksum)                                                \
  X(kSkbCopyAndCsumBits, "skb_copy_and_csum_bits", kChecksum)                               \
  X(kSkbChecksumHelp, "skb_checksum_help", kChecksum)                                       \
  X(kSkbCopyAndCsumDatagramIovec, "skb_copy_and_csum_datagram_iovec", kChecksum)            \
  X(kSkbChecksumComplete, "__skb_checksum_complete", kChecksum)                             \
  X(kIpFastCsum, "ip_fast_csum", kChecksum)                                                 \
  X(kIpDecreaseTtl, "ip_decrease_ttl", kProtocol)                                           \
  /* TCP: net/ipv4/tcp*.c (6.x: tcp_sendmsg_locked, __tcp_transmit_skb, tcp_v4_send_check) */ \
  X(kTcpSendmsg, "tcp_sendmsg", kProtocol)                                                  \
  X(kTcpPushPendingFrames, "tcp_push", kProtocol)                                           \
  X(kTcpWriteXmit, "tcp_write_xmit", kProtocol)                                             \
  X(kTsoFragment, "tso_fragment", kProtocol)                                                \
  X(kTcpTransmitSkb, "tcp_transmit_skb", kProtocol)                                         \
  X(kTcpV4SendCheck, "tcp_v4_send_check", kChecksum)                                        \
  X(kTcpV4Rcv, "tcp_v4_rcv", kProtocol)                                                     \
  X(kTcpRcvEstablished, "tcp_rcv_established", kProtocol)                                   \
  /* the socket's backlog while its owner's call holds it (6.x: tcp_add_backlog) */          \
  X(kSkAddBacklog, "sk_add_backlog", kProtocol)                                             \
  X(kTcpV4DoRcv, "tcp_v4_do_rcv", kProtocol)                                                \
  X(kTcpDataQueueOfo, "tcp_data_queue_ofo", kProtocol)                                      \
  X(kTcpAck, "tcp_ack", kProtocol)                                                          \
  X(kTcpSendAck, "tcp_send_ack", kProtocol)                                                 \
  X(kTcpRecvmsg, "tcp_recvmsg", kProtocol)                                                  \
  X(kTcpGroReceive, "tcp_gro_receive", kProtocol)                                           \
  /* UDP */                                                                                 \
  X(kUdpSendmsg, "udp_sendmsg", kProtocol)                                                  \
  X(kUdpRcv, "udp_rcv", kProtocol)                                                          \
  X(kUdpRecvmsg, "udp_recvmsg", kProtocol)                                                  \
  X(kUdpQueueRcvSkb, "udp_queue_rcv_skb", kProtocol)                                        \
  X(kSockQueueRcvSkb, "sock_queue_rcv_skb", kProtocol)                                      \
  X(kSockAllocSendSkb, "sock_alloc_send_skb", kSkb)                                         \
  X(kIpAppendData, "ip_append_data", kProtocol)                                             \
  X(kIpPushPendingFrames, "ip_push_pending_frames", kProtocol)                              \
  /* IPv4: net/ipv4/ip_{output,input,forward}.c, route.c */                                 \
  X(kIpQueueXmit, "ip_queue_xmit", kProtocol)                                               \
  X(kIpOutput, "ip_output", kProtocol)                                                      \
  X(kIpFinishOutput, "ip_finish_output", kProtocol)                                         \
  X(kIpFinishOutput2, "ip_finish_output2", kProtocol)                                       \
  X(kNeighHhOutput, "neigh_hh_output", kProtocol)                                           \
  X(kIpRcv, "ip_rcv", kProtocol)                                                            \
  X(kIpRcvFinish, "ip_rcv_finish", kProtocol)                                               \
  X(kIpRouteInput, "ip_route_input", kProtocol)                                             \
  X(kIpForward, "ip_forward", kProtocol)                                                    \
  X(kIpForwardFinish, "ip_forward_finish", kProtocol)                                       \
  X(kIpLocalDeliver, "ip_local_deliver", kProtocol)                                         \
  X(kNfHookSlow, "nf_hook_slow", kProtocol)                                                 \
  /* core device layer: net/core/dev.c, net/sched/sch_generic.c */                          \
  X(kDevQueueXmit, "dev_queue_xmit", kDevice)                                               \
  X(kDevHardStartXmit, "dev_hard_start_xmit", kDevice)                                      \
  X(kValidateXmitSkb, "validate_xmit_skb", kDevice)                                         \
  X(kSkbGsoSegment, "skb_gso_segment", kDevice)                                             \
  X(kQdiscEnqueue, "pfifo_fast_enqueue", kDevice)                                           \
  X(kQdiscRestart, "qdisc_restart", kDevice)                                                \
  X(kNetifRx, "netif_rx", kDevice)                                                          \
  X(kNetRxAction, "net_rx_action", kDevice)                                                 \
  X(kProcessBacklog, "process_backlog", kDevice)                                            \
  X(kNetifReceiveSkb, "netif_receive_skb", kDevice)                                         \
  X(kEthTypeTrans, "eth_type_trans", kDevice)                                               \
  X(kNapiGroReceive, "napi_gro_receive", kDevice)                                           \
  X(kDevGroReceive, "dev_gro_receive", kDevice)                                             \
  X(kDoSoftirq, "__do_softirq", kDevice)                                                    \
  /* drivers */                                                                             \
  X(kE1000XmitFrame, "e1000_xmit_frame", kDevice)                                           \
  X(kE1000CleanTxIrq, "e1000_clean_tx_irq", kDevice)                                        \
  X(kE1000CleanRxIrq, "e1000_clean_rx_irq", kDevice)                                        \
  X(kE1000Intr, "e1000_intr", kDevice)                                                      \
  X(kEtunXmit, "etun_xmit", kDevice)                                                        \
  X(kVethXmit, "veth_xmit", kDevice)                                                        \
  X(kDevForwardSkb, "__dev_forward_skb", kDevice)                                           \
  X(kVenetXmit, "venet_xmit", kDevice)                                                      \
  X(kLoopbackXmit, "loopback_xmit", kDevice)                                                \
  X(kBrHandleFrame, "br_handle_frame", kDevice)                                             \
  X(kBrForward, "br_forward", kDevice)                                                      \
  X(kBrHandleFrameFinish, "br_handle_frame_finish", kDevice)                                \
  X(kBrFdbGet, "__br_fdb_get", kDevice)                                                     \
  X(kBrForwardFinish, "br_forward_finish", kDevice)                                         \
  X(kBrDevQueuePushXmit, "br_dev_queue_push_xmit", kDevice)                                 \
  X(kBrDevXmit, "br_dev_xmit", kDevice)                                                     \
  X(kBrPassFrameUp, "br_pass_frame_up", kDevice)                                            \
  /* process and system */                                                                  \
  /* a system call's entry and exit, priced by cpu.syscall_us */                           \
  X(kSyscall, "entry_SYSCALL_64", kOther)                                                   \
  X(kSysSendto, "sys_sendto", kOther)                                                       \
  X(kSysRecvfrom, "sys_recvfrom", kOther)                                                   \
  /* select(): its entry and exit, and one poll of each descriptor (iperf3, once per Nread) */ \
  X(kDoSelect, "do_select", kOther)                                                         \
  X(kScheduleWakeup, "try_to_wake_up", kOther)                                              \
  /* a context switch, counted per switch as /proc/stat ctxt counts them */                 \
  X(kSchedule, "__schedule", kOther)                                                        \
  /* waking a task on another, idle CPU: 2.6.20 resched_task -> smp_send_reschedule, 6.x */ \
  /* ttwu_queue_wakelist -> send_call_function_single_ipi; the receiving CPU's interrupt */ \
  /* (6.x sysvec_call_function_single) leaves the idle loop (tick_nohz_idle_exit) */        \
  X(kSendIpi, "smp_send_reschedule", kOther)                                                \
  X(kIpiInterrupt, "smp_reschedule_interrupt", kOther)                                      \
  /* on a KVM guest, the exit of the ICR write (x2apic_send_IPI) when the target */         \
  /* vCPU's thread is blocked on the host (its halt outlasted the polling window): */       \
  /* the host wakes it (kvm_vcpu_kick) first; priced by cpu.ipi_send_blocked_us */          \
  X(kSendIpiBlocked, "x2apic_send_IPI", kOther)                                             \
  /* leaving the idle loop after a long halt, whatever ended it (6.x do_idle: the */         \
  /* interrupt's entry, tick_nohz_idle_exit restarting the tick; on a VM whose host blocked */ \
  /* the vCPU's thread, the caches refilled after it), priced by cpu.idle_exit_blocked_us */ \
  X(kIdleExit, "tick_nohz_idle_exit", kOther)                                              \
  /* one idle period's own work outside its cpuidle state, however long: 6.x do_idle */     \
  /* entering the loop and stopping the tick, leaving it and restarting the tick, and */    \
  /* schedule_idle's switch to the woken task (where a profile of a 6.x guest samples */    \
  /* most of it: finish_task_switch); priced by cpu.idle_period_us */                       \
  X(kScheduleIdle, "schedule_idle", kOther)                                                 \
  /* a timer queued on the timer wheel, or moved on it (sk_reset_timer -> mod_timer): */    \
  /* TCP's retransmission and loss-probe timer, its delayed-ACK timer */                    \
  X(kModTimer, "__mod_timer", kOther)

enum class Sym : std::uint16_t {
#define SKBSIM_SYM_ENUM(e, name, group) e,
  SKBSIM_SYMBOLS(SKBSIM_SYM_ENUM)
#undef SKBSIM_SYM_ENUM
      kCount
};

inline constexpr std::size_t kSymCount = static_cast<std::size_t>(Sym::kCount);

// The kernel symbol, e.g. "pskb_expand_head".
std::string_view symbol_name(Sym s) noexcept;
SymGroup symbol_group(Sym s) noexcept;
std::string_view group_name(SymGroup g) noexcept;
// Inverse of symbol_name(); nullopt for an unknown name.
std::optional<Sym> symbol_from_name(std::string_view name) noexcept;

constexpr std::size_t index(Sym s) noexcept { return static_cast<std::size_t>(s); }

}  // namespace skbsim
