/* mcclab-linkemu: NFQUEUE glue around the link model.  One process per
 * network namespace, one NFQUEUE (and netlink socket) per emulated link
 * direction, a single-threaded epoll loop, and a timerfd armed at the
 * earliest verdict or stats deadline; a second thread writes the stats. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <libmnl/libmnl.h>
#include <libnetfilter_queue/libnetfilter_queue.h>
#include <linux/netfilter.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "model.h"

/* The kernel reports the full length in NFQA_CAP_LEN when it truncates, so
 * a few header bytes are all we need to copy. */
#define COPY_RANGE 64
#define KERNEL_QMAXLEN 65536
#define RCVBUF_BYTES (16 << 20)
#define DRAIN_BATCH 64
#define LATE_BUCKETS 200
#define LATE_BUCKET_NS 10000

struct lane {
	struct le_queue q;
	struct mnl_socket *nl;
	int fd;
	uint32_t portid;
	uint32_t cfg_seq;
	int acked, ack_err;
	uint64_t enobufs, nl_errors;
	/* From /proc/net/netfilter/nfnetlink_queue: packets the kernel dropped
	 * because our queue was full or the netlink send failed. */
	uint64_t k_total, k_dropped, k_user_dropped;
	/* How late verdicts go out relative to the model's due time: the
	 * emulator's own accuracy, so experiments can be checked against it. */
	uint64_t late_n, late_over_100us;
	int64_t late_sum_ns, late_max_ns;
	uint64_t late_hist[LATE_BUCKETS + 1]; /* 10 us buckets, last = overflow */
	/* When: the most recent verdicts at least --late-log-us late (monotonic ns). */
	struct le_latelog late_log;
};

static struct lane *lanes;
static size_t nlanes;
static const char *stats_path;
static int memory_locked; /* mlockall succeeded (see lock_memory) */
static long late_log_us = 500; /* --late-log-us; 0 = off */
/* Longest stats write: the loop serves no packet meanwhile, so the stats say
 * whether writing them ever held the link up. */
static int64_t stats_write_max_ns;
static char vbuf[1 << 16]; /* pending verdicts for one lane */
static size_t vlen;
static char rbuf[1 << 16];

static int64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void die(const char *what)
{
	fprintf(stderr, "mcclab-linkemu: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void flush_verdicts(struct lane *l)
{
	if (vlen == 0)
		return;
	ssize_t r;
	int tries = 0;
	while ((r = mnl_socket_sendto(l->nl, vbuf, vlen)) < 0 && tries++ < 3 &&
	       (errno == EINTR || errno == EAGAIN || errno == ENOBUFS))
		;
	if (r < 0) {
		/* Lost verdicts leave packets stuck in the kernel queue until
		 * exit; count it loudly rather than abort the whole node. */
		l->nl_errors++;
		fprintf(stderr, "mcclab-linkemu: queue %u: verdict send: %s\n", l->q.cfg.queue,
			strerror(errno));
	}
	vlen = 0;
}

static void add_verdict(struct lane *l, uint32_t id, int verdict)
{
	if (vlen + 64 > sizeof(vbuf))
		flush_verdicts(l);
	struct nlmsghdr *nlh = nfq_nlmsg_put(vbuf + vlen, NFQNL_MSG_VERDICT, l->q.cfg.queue);
	nfq_nlmsg_verdict_put(nlh, (int)id, verdict);
	vlen += NLMSG_ALIGN(nlh->nlmsg_len);
}

static void on_packet(struct lane *l, const struct nlmsghdr *nlh, int64_t now)
{
	struct nlattr *attr[NFQA_MAX + 1] = {0};
	if (nfq_nlmsg_parse(nlh, attr) < 0 || !attr[NFQA_PACKET_HDR]) {
		l->nl_errors++;
		return;
	}
	const struct nfqnl_msg_packet_hdr *ph = mnl_attr_get_payload(attr[NFQA_PACKET_HDR]);
	uint32_t id = ntohl(ph->packet_id);
	uint32_t len = 0;
	if (attr[NFQA_CAP_LEN])
		len = ntohl(mnl_attr_get_u32(attr[NFQA_CAP_LEN]));
	else if (attr[NFQA_PAYLOAD])
		len = mnl_attr_get_payload_len(attr[NFQA_PAYLOAD]);
	int control = 0;
	if (l->q.cfg.protect_control && attr[NFQA_PAYLOAD])
		control = le_is_control(mnl_attr_get_payload(attr[NFQA_PAYLOAD]),
					mnl_attr_get_payload_len(attr[NFQA_PAYLOAD]));
	enum le_fate fate = control ? le_arrive_control(&l->q, now, id, len)
				    : le_arrive(&l->q, now, id, len);
	if (fate != LE_ADMIT)
		add_verdict(l, id, NF_DROP);
}

static void on_msgs(struct lane *l, const void *buf, int len, int64_t now)
{
	const struct nlmsghdr *nlh = buf;
	for (; mnl_nlmsg_ok(nlh, len); nlh = mnl_nlmsg_next(nlh, &len)) {
		if (nlh->nlmsg_type == NLMSG_ERROR) {
			const struct nlmsgerr *e = mnl_nlmsg_get_payload(nlh);
			if (nlh->nlmsg_seq && nlh->nlmsg_seq == l->cfg_seq) {
				l->acked = 1;
				l->ack_err = -e->error;
			} else if (e->error) {
				l->nl_errors++;
			}
		} else if (nlh->nlmsg_type == ((NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET)) {
			on_packet(l, nlh, now);
		}
	}
}

/* Returns 0 when the socket is drained, 1 if more may be pending. */
static int drain(struct lane *l)
{
	int i;
	for (i = 0; i < DRAIN_BATCH; i++) {
		ssize_t r = recv(l->fd, rbuf, sizeof(rbuf), 0);
		if (r < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			if (errno == ENOBUFS) {
				/* The kernel dropped queued packets it could not
				 * deliver (counted in k_user_dropped); keep going. */
				l->enobufs++;
				continue;
			}
			if (errno == EINTR)
				continue;
			die("netlink recv");
		}
		on_msgs(l, rbuf, (int)r, mono_ns());
	}
	flush_verdicts(l);
	return i == DRAIN_BATCH;
}

static void lane_open(struct lane *l)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	unsigned qn = l->q.cfg.queue;

	l->nl = mnl_socket_open(NETLINK_NETFILTER);
	if (!l->nl)
		die("netlink socket");
	if (mnl_socket_bind(l->nl, 0, MNL_SOCKET_AUTOPID) < 0)
		die("netlink bind");
	l->portid = mnl_socket_get_portid(l->nl);
	l->fd = mnl_socket_get_fd(l->nl);
	int sz = RCVBUF_BYTES;
	if (setsockopt(l->fd, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof(sz)) < 0)
		setsockopt(l->fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));

	/* One message carries bind + parameters so the queue never exists in
	 * a half-configured state.  FAIL_OPEN and GSO are cleared explicitly:
	 * fail closed when full, and have the kernel segment GSO packets so
	 * each wire packet is modelled on its own. */
	struct nlmsghdr *nlh = nfq_nlmsg_put(buf, NFQNL_MSG_CONFIG, qn);
	nfq_nlmsg_cfg_put_cmd(nlh, AF_INET, NFQNL_CFG_CMD_BIND);
	nfq_nlmsg_cfg_put_params(nlh, NFQNL_COPY_PACKET, COPY_RANGE);
	nfq_nlmsg_cfg_put_qmaxlen(nlh, KERNEL_QMAXLEN);
	mnl_attr_put_u32(nlh, NFQA_CFG_MASK, htonl(NFQA_CFG_F_FAIL_OPEN | NFQA_CFG_F_GSO));
	mnl_attr_put_u32(nlh, NFQA_CFG_FLAGS, htonl(0));
	nlh->nlmsg_flags |= NLM_F_ACK;
	nlh->nlmsg_seq = l->cfg_seq = (uint32_t)time(NULL) ^ (qn << 16) ^ 1;
	if (mnl_socket_sendto(l->nl, nlh, nlh->nlmsg_len) < 0)
		die("netlink send config");

	/* Packets may already be arriving if the iptables rule exists, so the
	 * ack is read through the normal message path. */
	while (!l->acked) {
		int r = (int)recv(l->fd, rbuf, sizeof(rbuf), 0);
		if (r < 0) {
			if (errno == EINTR || errno == ENOBUFS)
				continue;
			die("netlink recv config ack");
		}
		on_msgs(l, rbuf, r, mono_ns());
	}
	flush_verdicts(l);
	if (l->ack_err) {
		errno = l->ack_err;
		fprintf(stderr, "mcclab-linkemu: binding NFQUEUE %u: %s%s\n", qn, strerror(errno),
			errno == EPERM ? " (is another process bound to this queue?)" : "");
		exit(1);
	}
	if (fcntl(l->fd, F_SETFL, fcntl(l->fd, F_GETFL) | O_NONBLOCK) < 0)
		die("fcntl");
}

/* Stats are written off the packet loop.  At each stats deadline the loop copies
 * the counters into a snapshot (microseconds, no system call) and a writer
 * thread at normal priority reads the kernel's counters, formats the JSON and
 * replaces the file: /proc reads and file system calls took up to 12 ms in the
 * loop on a loaded VM, and every verdict due meanwhile went out that late. */
struct lane_snap {
	unsigned queue;
	uint32_t portid;
	char name[64];
	uint64_t pkts_in, bytes_in, pkts_out, bytes_out, drops_queue, drops_loss, control_in;
	uint64_t qlen, qlen_bytes, max_qlen, in_flight;
	double red_avg;
	uint64_t enobufs, nl_errors;
	uint64_t k_total, k_dropped, k_user_dropped;
	uint64_t late_n, late_over_100us;
	int64_t late_sum_ns, late_max_ns;
	uint64_t late_hist[LATE_BUCKETS + 1];
	struct le_latelog late_log;
};

static struct lane_snap *snap_shared, *snap_local; /* loop -> writer, writer's copy */
static int64_t snap_time;
static int snap_ready, writer_stop, writer_running, realtime;
static pthread_mutex_t snap_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t snap_cv = PTHREAD_COND_INITIALIZER;
static pthread_t writer;

static void read_kernel_counters(struct lane_snap *s, size_t n)
{
	FILE *f = fopen("/proc/net/netfilter/nfnetlink_queue", "r");
	if (!f)
		return;
	unsigned qn, portid, total, mode, range, dropped, udropped, seq;
	int one;
	while (fscanf(f, "%u %u %u %u %u %u %u %u %d", &qn, &portid, &total, &mode, &range, &dropped,
		      &udropped, &seq, &one) == 9) {
		for (size_t i = 0; i < n; i++) {
			if (s[i].queue == qn && s[i].portid == portid) {
				s[i].k_total = total;
				s[i].k_dropped = dropped;
				s[i].k_user_dropped = udropped;
			}
		}
	}
	fclose(f);
}

/* Upper edge of the histogram bucket holding the given quantile, in us;
 * -1 if it lies beyond the histogram (> 2 ms). */
static double late_quantile(const struct lane_snap *l, double q)
{
	uint64_t want = (uint64_t)(q * (double)l->late_n), acc = 0;
	for (int b = 0; b < LATE_BUCKETS; b++) {
		acc += l->late_hist[b];
		if (acc > want)
			return (b + 1) * LATE_BUCKET_NS / 1e3;
	}
	return l->late_n ? -1 : 0;
}

/* Copies the counters as of now into *s (the loop's side: no system call). */
static void snapshot(struct lane_snap *s, int64_t now)
{
	for (size_t i = 0; i < nlanes; i++) {
		struct lane *l = &lanes[i];
		struct le_queue *q = &l->q;
		le_advance(q, now);
		struct lane_snap *o = &s[i];
		o->queue = q->cfg.queue;
		o->portid = l->portid;
		memcpy(o->name, q->cfg.name, sizeof(o->name));
		o->pkts_in = q->pkts_in;
		o->bytes_in = q->bytes_in;
		o->pkts_out = q->pkts_out;
		o->bytes_out = q->bytes_out;
		o->drops_queue = q->drops_queue;
		o->drops_loss = q->drops_loss;
		o->control_in = q->control_in;
		o->qlen = le_qlen(q);
		o->qlen_bytes = q->qlen_bytes;
		o->max_qlen = q->max_qlen;
		o->in_flight = le_in_flight(q);
		o->red_avg = q->red_avg;
		o->enobufs = l->enobufs;
		o->nl_errors = l->nl_errors;
		o->k_total = o->k_dropped = o->k_user_dropped = 0;
		o->late_n = l->late_n;
		o->late_over_100us = l->late_over_100us;
		o->late_sum_ns = l->late_sum_ns;
		o->late_max_ns = l->late_max_ns;
		memcpy(o->late_hist, l->late_hist, sizeof(o->late_hist));
		o->late_log = l->late_log; /* 4 KB, still only a copy */
	}
}

/* Writes the stats file from a snapshot (the writer's side, or main at start
 * and exit): kernel counters, JSON to FILE.tmp.<pid>, rename. */
static void write_snapshot(struct lane_snap *s, int64_t now)
{
	int64_t t0 = mono_ns();
	/* The late events are kept in CLOCK_MONOTONIC and written as CLOCK_REALTIME,
	 * the clock the measurements they excuse are stamped with. The offset
	 * (realtime - monotonic, read back to back) is taken here rather than in
	 * the loop's snapshot(), so the loop only copies: it changes only when the
	 * wall clock is slewed (NTP, typically <= 500 ppm: a few us over the ms
	 * between snapshot and write) or stepped (which shifts the events recorded
	 * before the step whichever side reads the offset). */
	struct timespec rt;
	clock_gettime(CLOCK_REALTIME, &rt);
	const int64_t rt_offset = (int64_t)rt.tv_sec * 1000000000 + rt.tv_nsec - mono_ns();
	read_kernel_counters(s, nlanes);
	char tmp[4096];
	snprintf(tmp, sizeof(tmp), "%s.tmp.%d", stats_path, (int)getpid());
	FILE *f = fopen(tmp, "w");
	if (!f) {
		fprintf(stderr, "mcclab-linkemu: %s: %s\n", tmp, strerror(errno));
		return;
	}
	fprintf(f, "{\"time\": %.6f, \"pid\": %d, \"realtime\": %s, \"locked\": %s, "
		"\"stats_write_max_us\": %.1f, \"queues\": {", (double)now * 1e-9, (int)getpid(),
		realtime ? "true" : "false", memory_locked ? "true" : "false",
		(double)stats_write_max_ns / 1e3);
	for (size_t i = 0; i < nlanes; i++) {
		const struct lane_snap *l = &s[i];
		fprintf(f,
			"%s\n  \"%u\": {\"name\": \"%s\", \"pkts_in\": %" PRIu64 ", \"bytes_in\": %" PRIu64
			", \"pkts_out\": %" PRIu64 ", \"bytes_out\": %" PRIu64 ", \"drops_queue\": %" PRIu64
			", \"drops_loss\": %" PRIu64 ", \"control_in\": %" PRIu64
			", \"qlen_pkts\": %" PRIu64 ", \"qlen_bytes\": %" PRIu64
			", \"red_avg\": %.6f, \"max_qlen\": %" PRIu64 ", \"in_flight\": %" PRIu64
			", \"kernel_queue_total\": %" PRIu64 ", \"kernel_dropped\": %" PRIu64
			", \"kernel_user_dropped\": %" PRIu64 ", \"enobufs\": %" PRIu64
			", \"nl_errors\": %" PRIu64 ", \"late_avg_us\": %.1f, \"late_max_us\": %.1f"
			", \"late_p50_us\": %.0f, \"late_p99_us\": %.0f, \"late_over_100us\": %" PRIu64,
			i ? "," : "", l->queue, l->name, l->pkts_in, l->bytes_in, l->pkts_out,
			l->bytes_out, l->drops_queue, l->drops_loss, l->control_in, l->qlen, l->qlen_bytes,
			l->red_avg,
			l->max_qlen, l->in_flight, l->k_total, l->k_dropped, l->k_user_dropped,
			l->enobufs, l->nl_errors,
			l->late_n ? (double)l->late_sum_ns / (double)l->late_n / 1e3 : 0.0,
			(double)l->late_max_ns / 1e3, late_quantile(l, 0.5), late_quantile(l, 0.99),
			l->late_over_100us);
		fprintf(f, ", \"late_log_us\": %ld, \"late_events_total\": %" PRIu64
			", \"late_events\": [", late_log_us, l->late_log.total);
		for (size_t k = 0; k < le_latelog_len(&l->late_log); k++) {
			const struct le_late_event *e = le_latelog_at(&l->late_log, k);
			fprintf(f, "%s[%" PRId64 ", %" PRId64 "]", k ? ", " : "",
				e->due + rt_offset, e->released + rt_offset);
		}
		fprintf(f, "]}");
	}
	fprintf(f, "\n}}\n");
	if (fclose(f) != 0 || rename(tmp, stats_path) < 0) {
		fprintf(stderr, "mcclab-linkemu: writing %s: %s\n", stats_path, strerror(errno));
		unlink(tmp);
	}
	int64_t took = mono_ns() - t0;
	if (took > stats_write_max_ns)
		stats_write_max_ns = took;
}

static void *writer_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&snap_mu);
	for (;;) {
		while (!snap_ready && !writer_stop)
			pthread_cond_wait(&snap_cv, &snap_mu);
		if (!snap_ready)
			break; /* stopping, nothing pending: main writes the final stats */
		memcpy(snap_local, snap_shared, nlanes * sizeof(*snap_local));
		int64_t t = snap_time;
		snap_ready = 0;
		pthread_mutex_unlock(&snap_mu);
		write_snapshot(snap_local, t);
		pthread_mutex_lock(&snap_mu);
	}
	pthread_mutex_unlock(&snap_mu);
	return NULL;
}

/* The loop's stats step: hand a snapshot to the writer.  Never waits: if the
 * writer holds the lock (it may be preempted there, being at normal priority),
 * this deadline is skipped and the next one, 100 ms later, writes. */
static void post_stats(int64_t now)
{
	if (!stats_path)
		return;
	if (!writer_running) {
		snapshot(snap_local, now);
		write_snapshot(snap_local, now);
		return;
	}
	if (pthread_mutex_trylock(&snap_mu) != 0)
		return;
	snapshot(snap_shared, now);
	snap_time = now;
	snap_ready = 1;
	pthread_cond_signal(&snap_cv);
	pthread_mutex_unlock(&snap_mu);
}

/* Starts the writer at normal priority (SCHED_OTHER) whatever the loop runs at.
 * If it cannot start, the loop writes the stats itself, as before. */
static void start_writer(void)
{
	if (!stats_path)
		return;
	pthread_attr_t attr;
	struct sched_param sp = {.sched_priority = 0};
	pthread_attr_init(&attr);
	/* its stack is locked too (mlockall MCL_FUTURE): keep it small */
	pthread_attr_setstacksize(&attr, 256 << 10);
	pthread_attr_setinheritsched(&attr, PTHREAD_EXPLICIT_SCHED);
	pthread_attr_setschedpolicy(&attr, SCHED_OTHER);
	pthread_attr_setschedparam(&attr, &sp);
	int err = pthread_create(&writer, &attr, writer_main, NULL);
	pthread_attr_destroy(&attr);
	if (err) {
		fprintf(stderr, "mcclab-linkemu: stats writer thread: %s; writing from the loop\n",
			strerror(err));
		return;
	}
	writer_running = 1;
}

/* Stops the writer (after any write in progress) and writes the final stats. */
static void stop_writer_and_write(int64_t now)
{
	if (!stats_path)
		return;
	if (writer_running) {
		pthread_mutex_lock(&snap_mu);
		writer_stop = 1;
		snap_ready = 0;
		pthread_cond_signal(&snap_cv);
		pthread_mutex_unlock(&snap_mu);
		pthread_join(writer, NULL);
		writer_running = 0;
	}
	post_stats(now);
}

static void arm(int tfd, int64_t when)
{
	struct itimerspec its = {0};
	if (when != INT64_MAX) {
		if (when <= 0)
			when = 1; /* zero would disarm */
		its.it_value.tv_sec = when / 1000000000;
		its.it_value.tv_nsec = when % 1000000000;
	}
	if (timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL) < 0)
		die("timerfd_settime");
}

/* The emulator is the network: on a busy 2-core machine a normal-priority
 * process waits behind agents and routers for up to milliseconds, which is
 * the RTT tail.  SCHED_FIFO wakes it at once.  Refused (no CAP_SYS_NICE, or
 * an RT cgroup without a budget) is not fatal: the link still works, only
 * with the wider tail, and the stats say which policy ran. */
static void set_realtime(long prio)
{
	if (!prio)
		return;
	struct sched_param sp = {.sched_priority = (int)prio};
	if (sched_setscheduler(0, SCHED_FIFO, &sp) < 0) {
		fprintf(stderr, "mcclab-linkemu: SCHED_FIFO %ld refused (%s); running at normal "
				"priority\n", prio, strerror(errno));
		return;
	}
	fprintf(stderr, "mcclab-linkemu: SCHED_FIFO priority %ld\n", prio);
}

/* A page the kernel took away faults back in from disk: tens of ms in which
 * the link serves nothing, whatever the priority.  The VMs mcclab runs on
 * reclaim cold memory behind the guest's back (DAMON "pageout" on physical
 * memory), and an emulator 36 ms late with the machine otherwise running was
 * seen in CI rehearsals.  Locked pages are never reclaimed. */
static void lock_memory(void)
{
	if (mlockall(MCL_CURRENT | MCL_FUTURE) < 0) {
		fprintf(stderr, "mcclab-linkemu: mlockall refused (%s); pages may be reclaimed\n",
			strerror(errno));
		return;
	}
	memory_locked = 1;
	fprintf(stderr, "mcclab-linkemu: memory locked\n");
}

static void usage(FILE *f)
{
	fprintf(f, "usage: mcclab-linkemu --config FILE [--stats FILE] [--stats-interval-ms N]\n"
		   "                      [--spin-us N] [--spin-budget-ms N] [--rt-priority N]\n"
		   "                      [--late-log-us N] [--check]\n"
		   "See linkemu/README.md for the config and stats formats.\n");
}

enum { EV_TIMER = 0xffff0000u, EV_SIGNAL };

int main(int argc, char **argv)
{
	const char *config = NULL;
	int check = 0;
	long interval_ms = 100;
	long spin_us = 0;
	long spin_budget_ms = 100;
	long rt_priority = 0;
	static const struct option opts[] = {
		{"config", required_argument, 0, 'c'}, {"stats", required_argument, 0, 's'},
		{"stats-interval-ms", required_argument, 0, 'i'}, {"check", no_argument, 0, 'k'},
		{"spin-us", required_argument, 0, 'p'}, {"rt-priority", required_argument, 0, 'r'},
		{"spin-budget-ms", required_argument, 0, 'b'},
		{"late-log-us", required_argument, 0, 'l'},
		{"help", no_argument, 0, 'h'},
		{0, 0, 0, 0},
	};
	int o;
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case 'c': config = optarg; break;
		case 's': stats_path = optarg; break;
		case 'i': {
			char *end;
			interval_ms = strtol(optarg, &end, 10);
			if (*end || interval_ms < 1 || interval_ms > 3600000) {
				fprintf(stderr, "mcclab-linkemu: --stats-interval-ms: bad value '%s'\n", optarg);
				return 2;
			}
			break;
		}
		case 'p': {
			char *end;
			spin_us = strtol(optarg, &end, 10);
			if (*end || spin_us < 0 || spin_us > 1000) {
				fprintf(stderr, "mcclab-linkemu: --spin-us: bad value '%s' (0..1000)\n", optarg);
				return 2;
			}
			break;
		}
		case 'b': {
			char *end;
			spin_budget_ms = strtol(optarg, &end, 10);
			if (*end || spin_budget_ms < 0 || spin_budget_ms > 1000) {
				fprintf(stderr, "mcclab-linkemu: --spin-budget-ms: bad value '%s' "
					"(0..1000)\n", optarg);
				return 2;
			}
			break;
		}
		case 'r': {
			char *end;
			rt_priority = strtol(optarg, &end, 10);
			if (*end || rt_priority < 0 || rt_priority > 99) {
				fprintf(stderr, "mcclab-linkemu: --rt-priority: bad value '%s' (0..99)\n",
					optarg);
				return 2;
			}
			break;
		}
		case 'l': {
			char *end;
			late_log_us = strtol(optarg, &end, 10);
			if (end == optarg || *end || late_log_us < 0 || late_log_us > 60000000) {
				fprintf(stderr, "mcclab-linkemu: --late-log-us: bad value '%s' "
					"(0..60000000)\n", optarg);
				return 2;
			}
			break;
		}
		case 'k': check = 1; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (!config || optind != argc) {
		usage(stderr);
		return 2;
	}

	struct le_cfg *cfgs;
	char err[1024];
	if (le_parse_config(config, &cfgs, &nlanes, err, sizeof(err)) < 0) {
		fprintf(stderr, "mcclab-linkemu: config error: %s\n", err);
		return 2;
	}
	if (check) {
		free(cfgs);
		return 0;
	}

	/* Block the signals before any socket exists so they are only ever
	 * seen through the signalfd, i.e. between loop iterations. */
	sigset_t sigs;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigprocmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);
	/* Default 50 us slack would eat most of the verdict accuracy budget. */
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
	set_realtime(rt_priority);
	realtime = sched_getscheduler(0) == SCHED_FIFO;
	if (rt_priority)
		lock_memory();

	lanes = calloc(nlanes, sizeof(*lanes));
	snap_shared = calloc(nlanes, sizeof(*snap_shared));
	snap_local = calloc(nlanes, sizeof(*snap_local));
	if (!lanes || !snap_shared || !snap_local)
		die("calloc");
	for (size_t i = 0; i < nlanes; i++) {
		if (le_queue_init(&lanes[i].q, &cfgs[i]) < 0)
			die("queue init");
		le_latelog_init(&lanes[i].late_log);
	}
	free(cfgs);
	for (size_t i = 0; i < nlanes; i++) {
		lane_open(&lanes[i]);
		const struct le_cfg *c = &lanes[i].q.cfg;
		fprintf(stderr,
			"mcclab-linkemu: queue %u (%s): rate_bps=%" PRIu64 " delay_us=%.1f jitter_us=%.1f "
			"loss=%g limit_pkts=%u disc=%s\n",
			c->queue, c->name, c->rate_bps, c->delay_ns / 1e3, c->jitter_ns / 1e3, c->loss,
			c->limit_pkts, c->disc == LE_RED ? "red" : "droptail");
	}
	/* Every queue is bound: the first stats file says so at once (written here,
	 * before the writer starts); the writer then takes over. */
	post_stats(mono_ns());
	start_writer();

	int ep = epoll_create1(EPOLL_CLOEXEC);
	int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	int sfd = signalfd(-1, &sigs, SFD_NONBLOCK | SFD_CLOEXEC);
	if (ep < 0 || tfd < 0 || sfd < 0)
		die("epoll/timerfd/signalfd");
	struct epoll_event ev = {.events = EPOLLIN};
	ev.data.u32 = EV_TIMER;
	epoll_ctl(ep, EPOLL_CTL_ADD, tfd, &ev);
	ev.data.u32 = EV_SIGNAL;
	epoll_ctl(ep, EPOLL_CTL_ADD, sfd, &ev);
	for (size_t i = 0; i < nlanes; i++) {
		ev.data.u32 = (uint32_t)i;
		if (epoll_ctl(ep, EPOLL_CTL_ADD, lanes[i].fd, &ev) < 0)
			die("epoll_ctl");
	}

	const int64_t interval = interval_ms * 1000000;
	const int64_t late_log_ns = (int64_t)late_log_us * 1000;
	struct le_spin spinner;
	le_spin_init(&spinner, spin_us * 1000, spin_budget_ms * 1000000, mono_ns());
	int64_t next_stats = mono_ns() + interval;
	int64_t armed = -1;
	int running = 1;
	while (running) {
		int64_t now = mono_ns();
		/* The same spin for the busy-wait and the next wakeup below: a wakeup
		 * armed early with no spin after it would find nothing due. */
		const int64_t spin = le_spin_now(&spinner, now);
		if (spin) {
			/* Timer wakeups on a VM are tens of microseconds late; waking
			 * early and spinning trades CPU for verdict accuracy. */
			int64_t d = INT64_MAX;
			for (size_t i = 0; i < nlanes; i++)
				if (le_next_due(&lanes[i].q) < d)
					d = le_next_due(&lanes[i].q);
			if (d > now && d - now <= spin) {
				const int64_t began = now;
				while ((now = mono_ns()) < d)
					;
				le_spin_used(&spinner, now - began, now);
			}
		}
		int64_t wake = INT64_MAX;
		for (size_t i = 0; i < nlanes; i++) {
			struct le_pkt p;
			struct lane *l = &lanes[i];
			while (le_pop_due(&l->q, now, &p)) {
				add_verdict(l, p.id, NF_ACCEPT);
				int64_t late = now - p.due;
				l->late_n++;
				l->late_sum_ns += late;
				l->late_over_100us += late > 100000;
				if (late > l->late_max_ns)
					l->late_max_ns = late;
				int64_t b = late / LATE_BUCKET_NS;
				l->late_hist[b < LATE_BUCKETS ? b : LATE_BUCKETS]++;
				le_latelog_note(&l->late_log, late_log_ns, p.due, now);
			}
			flush_verdicts(&lanes[i]);
			int64_t d = le_next_due(&lanes[i].q);
			if (d != INT64_MAX && d - spin < wake)
				wake = d - spin;
		}
		if (stats_path && now >= next_stats) {
			post_stats(now);
			while (next_stats <= now)
				next_stats += interval;
		}
		if (stats_path && next_stats < wake)
			wake = next_stats;
		if (wake != armed) {
			arm(tfd, wake);
			armed = wake;
		}

		struct epoll_event evs[16];
		int n = epoll_wait(ep, evs, 16, -1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			die("epoll_wait");
		}
		for (int k = 0; k < n; k++) {
			uint32_t tag = evs[k].data.u32;
			if (tag == EV_TIMER) {
				uint64_t exp;
				if (read(tfd, &exp, sizeof(exp)) < 0 && errno != EAGAIN)
					die("timerfd read");
				armed = -1; /* expired: must be re-armed even if unchanged */
			} else if (tag == EV_SIGNAL) {
				running = 0;
			} else {
				drain(&lanes[tag]);
			}
		}
	}

	stop_writer_and_write(mono_ns());
	/* Closing the sockets makes the kernel drop whatever is still queued:
	 * a stopped emulator is a dead link, never a free one. */
	for (size_t i = 0; i < nlanes; i++) {
		mnl_socket_close(lanes[i].nl);
		le_queue_free(&lanes[i].q);
	}
	free(lanes);
	free(snap_shared);
	free(snap_local);
	return 0;
}
