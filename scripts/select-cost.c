// select-cost.c — what one select() costs beyond a null system call when it does not sleep, on
// the descriptors iperf3's server reader passes in a stream (its listening socket, the control
// connection and the data connection, TCP over loopback; only the data one readable), warm, on
// one CPU: the figure a preset's calls.symbols.do_select is made from (cpu.syscall_us is the
// null call's). No tracing: the in-stream figure scripts/sleep-cycle.sh prints holds its
// probes' time. docs/measure.md, "What a sleep costs the reader's CPU". Built by hand:
//
//   gcc -O2 -o /tmp/select-cost scripts/select-cost.c && taskset -c 1 /tmp/select-cost [calls]
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

// A connection to the listener `l` at `sa`: the accepted end, readable when `readable` (one
// byte sent to it).
static int accepted(int l, const struct sockaddr_in* sa, int readable) {
  const int c = socket(AF_INET, SOCK_STREAM, 0);
  if (c < 0 || connect(c, (const struct sockaddr*)sa, sizeof *sa) != 0) {
    perror("connect");
    exit(1);
  }
  const int s = accept(l, NULL, NULL);
  if (s < 0 || (readable && write(c, "x", 1) != 1)) {
    perror("accept");
    exit(1);
  }
  return s;
}

int main(int argc, char** argv) {
  const long n = argc > 1 ? atol(argv[1]) : 300000;
  const int l = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof sa;
  if (l < 0 || bind(l, (struct sockaddr*)&sa, sizeof sa) != 0 ||
      getsockname(l, (struct sockaddr*)&sa, &len) != 0 || listen(l, 4) != 0) {
    perror("listen");
    return 1;
  }
  const int s1 = accepted(l, &sa, 0);  // the control connection: nothing to read mid-stream
  const int s2 = accepted(l, &sa, 1);  // the data connection
  usleep(10000);
  const int maxfd = s2 > s1 ? (s2 > l ? s2 : l) : (s1 > l ? s1 : l);
  double best_select = 1e18;
  double best_null = 1e18;
  for (int round = 0; round < 7; ++round) {
    const double t0 = now_ns();
    for (long i = 0; i < n; ++i) {
      fd_set rf;
      FD_ZERO(&rf);
      FD_SET(l, &rf);
      FD_SET(s1, &rf);
      FD_SET(s2, &rf);
      struct timeval tv = {1, 0};
      if (select(maxfd + 1, &rf, NULL, NULL, &tv) != 1 || !FD_ISSET(s2, &rf)) {
        fprintf(stderr, "select-cost: expected the data socket alone readable\n");
        return 1;
      }
    }
    const double t1 = now_ns();
    for (long i = 0; i < n; ++i) {
      syscall(SYS_getppid);
    }
    const double t2 = now_ns();
    best_select = (t1 - t0) / n < best_select ? (t1 - t0) / n : best_select;
    best_null = (t2 - t1) / n < best_null ? (t2 - t1) / n : best_null;
  }
  printf("select() %.1f ns, getppid() %.1f ns: select() less a null call %.1f ns\n", best_select,
         best_null, best_select - best_null);
  return 0;
}
