/* Unit tests for the link model (no netlink, no root).  Ends with the
 * plain "N passed, N failed" line. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "model.h"

static int passed, failed;

#define CHECK(cond, ...)                                                   \
	do {                                                               \
		if (cond) {                                                \
			passed++;                                          \
		} else {                                                   \
			failed++;                                          \
			printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
			printf(__VA_ARGS__);                               \
			printf("\n");                                      \
		}                                                          \
	} while (0)

#define MS 1000000LL
#define US 1000LL

static void mkq(struct le_queue *q, struct le_cfg *c)
{
	if (le_queue_init(q, c) < 0) {
		perror("le_queue_init");
		exit(1);
	}
}

static void test_serialization(void)
{
	struct le_cfg c;
	le_cfg_defaults(&c);
	c.rate_bps = 1000000;
	struct le_queue q;
	mkq(&q, &c);
	struct le_pkt p;

	CHECK(le_tx_time_ns(1000000, 1500) == 12 * MS, "1500 B at 1 Mbit/s");
	CHECK(le_tx_time_ns(10000000, 1500) == 1200 * US, "1500 B at 10 Mbit/s");
	CHECK(le_tx_time_ns(0, 1500) == 0, "unlimited");

	int64_t t0 = 1000 * MS;
	CHECK(le_arrive(&q, t0, 1, 1500) == LE_ADMIT, "admit");
	CHECK(le_arrive(&q, t0, 2, 1500) == LE_ADMIT, "admit");
	CHECK(le_next_due(&q) == t0 + 12 * MS, "first due %lld", (long long)(le_next_due(&q) - t0));
	CHECK(!le_pop_due(&q, t0 + 12 * MS - 1, &p), "not before 12 ms");
	CHECK(le_pop_due(&q, t0 + 12 * MS, &p) && p.id == 1, "first at 12 ms");
	CHECK(le_next_due(&q) == t0 + 24 * MS, "second waits for the first");
	CHECK(le_pop_due(&q, t0 + 24 * MS, &p) && p.id == 2, "second at 24 ms");

	/* After 100 ms idle, a burst is still paced: no accumulated credit. */
	int64_t t1 = t0 + 124 * MS;
	le_arrive(&q, t1, 3, 1500);
	le_arrive(&q, t1, 4, 1500);
	le_arrive(&q, t1, 5, 1500);
	CHECK(le_pop_due(&q, t1 + 12 * MS, &p) && p.id == 3, "idle no credit 1");
	CHECK(!le_pop_due(&q, t1 + 24 * MS - 1, &p), "idle no credit 2");
	CHECK(le_pop_due(&q, t1 + 24 * MS, &p) && p.id == 4, "idle no credit 2b");
	CHECK(le_pop_due(&q, t1 + 36 * MS, &p) && p.id == 5, "idle no credit 3");
	CHECK(q.pkts_out == 5 && q.bytes_out == 7500, "counters out");
	le_queue_free(&q);

	/* Propagation delay is added after serialization. */
	c.delay_ns = 50 * MS;
	mkq(&q, &c);
	le_arrive(&q, t0, 1, 1500);
	CHECK(le_next_due(&q) == t0 + 62 * MS, "12 ms + 50 ms");
	le_queue_free(&q);
}

static void test_droptail(void)
{
	struct le_cfg c;
	le_cfg_defaults(&c);
	c.rate_bps = 1000000;
	c.limit_pkts = 10;
	struct le_queue q;
	mkq(&q, &c);

	int64_t t = 5 * MS;
	int first_drop = -1;
	for (int i = 0; i < 30; i++) {
		uint64_t before = le_qlen(&q);
		enum le_fate f = le_arrive(&q, t, (uint32_t)i, 1000);
		if (f == LE_DROP_QUEUE && first_drop < 0) {
			first_drop = i;
			CHECK(before == 10, "first drop seen with qlen %llu", (unsigned long long)before);
		}
		if (f == LE_ADMIT)
			CHECK(before < 10, "admitted with qlen %llu", (unsigned long long)before);
	}
	/* One packet on the wire + 10 waiting, then drops. */
	CHECK(first_drop == 11, "first drop at arrival %d", first_drop);
	CHECK(q.drops_queue == 19, "drops %llu", (unsigned long long)q.drops_queue);
	CHECK(le_qlen(&q) == 10 && q.max_qlen == 10 && q.qlen_bytes == 10000, "qlen");

	/* After one transmission time a slot frees: exactly one more fits. */
	t += 8 * MS;
	CHECK(le_arrive(&q, t, 100, 1000) == LE_ADMIT, "slot freed");
	CHECK(le_arrive(&q, t, 101, 1000) == LE_DROP_QUEUE, "full again");
	le_queue_free(&q);

	/* Unlimited rate never queues. */
	c.rate_bps = 0;
	mkq(&q, &c);
	int drops = 0;
	for (int i = 0; i < 1000; i++)
		drops += le_arrive(&q, t, (uint32_t)i, 1500) != LE_ADMIT;
	CHECK(drops == 0 && le_qlen(&q) == 0, "unlimited rate drops %d", drops);
	le_queue_free(&q);
}

static int close_to(double a, double b) { return fabs(a - b) < 1e-9; }

static void test_red_formulas(void)
{
	struct le_cfg c;
	le_cfg_defaults(&c);
	c.disc = LE_RED;
	c.min_th = 5;
	c.max_th = 15;
	c.max_p = 0.1;

	c.gentle = 0;
	CHECK(le_red_pb(&c, 4.99) == 0.0, "below min_th");
	CHECK(close_to(le_red_pb(&c, 10), 0.05), "pb(10) = %g", le_red_pb(&c, 10));
	CHECK(close_to(le_red_pb(&c, 7.5), 0.025), "pb(7.5)");
	CHECK(le_red_pb(&c, 15) == 1.0, "non-gentle jumps to 1 at max_th");
	c.gentle = 1;
	CHECK(close_to(le_red_pb(&c, 15), 0.1), "gentle at max_th");
	CHECK(close_to(le_red_pb(&c, 22.5), 0.55), "gentle midway = %g", le_red_pb(&c, 22.5));
	CHECK(le_red_pb(&c, 30) == 1.0, "gentle at 2*max_th");

	CHECK(close_to(le_red_pa(&c, 0.05, 0), 0.05), "pa count 0");
	CHECK(close_to(le_red_pa(&c, 0.05, 10), 0.1), "pa count 10 = %g", le_red_pa(&c, 0.05, 10));
	CHECK(close_to(le_red_pa(&c, 0.05, 19), 1.0), "pa count 19");
	CHECK(le_red_pa(&c, 0.05, 25) == 1.0, "pa saturates");
	c.wait = 1;
	CHECK(le_red_pa(&c, 0.05, 10) == 0.0, "wait: no drop before 1/pb");
	CHECK(close_to(le_red_pa(&c, 0.05, 30), 0.1), "wait: pb/(2-count*pb)");
	CHECK(le_red_pa(&c, 0.05, 40) == 1.0, "wait: saturates");
}

static void test_red_avg(void)
{
	struct le_cfg c;
	le_cfg_defaults(&c);
	c.disc = LE_RED;
	c.weight = 0.5; /* large weight so the hand computation stays short */
	c.rate_bps = 1000000;
	c.mean_pktsize = 500; /* 4 ms per mean packet at 1 Mbit/s */
	struct le_queue q;
	mkq(&q, &c);

	/* Five packets at t=0: arrivals see waiting queues 0,0,1,2,3.
	 * avg: 0, 0, 0.5, 1.25, 2.125 */
	const double want[] = {0, 0, 0.5, 1.25, 2.125};
	int64_t t = 0;
	for (int i = 0; i < 5; i++) {
		le_arrive(&q, t, (uint32_t)i, 500);
		CHECK(close_to(q.red_avg, want[i]), "avg[%d] = %g want %g", i, q.red_avg, want[i]);
	}
	/* Link frees at 20 ms.  Arriving 8 ms + 1 us later: m = floor(2.00025)
	 * = 2 idle "packets": avg = 2.125 * 0.5^2 = 0.53125, then the arrival
	 * itself (queue 0): 0.265625. */
	le_arrive(&q, 28 * MS + 1 * US, 5, 500);
	CHECK(close_to(q.red_avg, 0.265625), "idle decay avg %g", q.red_avg);
	le_queue_free(&q);

	/* ns-2 default weight and a queue held at 10 waiting packets: avg
	 * after n arrivals from 0 is 10 * (1 - (1-w)^n) once the queue is
	 * stable.  Checked by building the queue first with w tiny. */
	le_cfg_defaults(&c);
	c.disc = LE_RED;
	c.rate_bps = 1000000;
	c.weight = 0.002;
	mkq(&q, &c);
	le_arrive(&q, 0, 0, 1000); /* on the wire for 8 ms */
	double avg = 0;
	for (int i = 1; i <= 10; i++) {
		le_arrive(&q, 0, (uint32_t)i, 1000);
		avg = 0.998 * avg + 0.002 * (i - 1);
	}
	CHECK(close_to(q.red_avg, avg), "ewma %g vs %g", q.red_avg, avg);
	le_queue_free(&q);
}

static void test_red_drops(void)
{
	struct le_cfg c;
	le_cfg_defaults(&c);
	c.disc = LE_RED;
	c.rate_bps = 1; /* nothing ever leaves: qlen only grows */
	c.limit_pkts = 1000000;
	c.weight = 1e-12; /* avg effectively frozen at the preset value */
	c.seed = 7;
	struct le_queue q;
	mkq(&q, &c);

	/* Put two packets in so qlen > 1, then freeze avg at 10: pb = 0.05.
	 * With p_a = pb/(1 - count*pb) the gap between early drops is
	 * uniform on 1..19 (mean 10, never more than 19). */
	le_arrive(&q, 0, 0, 100);
	le_arrive(&q, 0, 1, 100);
	le_arrive(&q, 0, 2, 100);
	q.red_avg = 10.0;
	int last = -1, ndrops = 0, maxgap = 0, mingap = 1 << 30;
	double sumgap = 0;
	for (int i = 3; i < 200000; i++) {
		if (le_arrive(&q, 0, (uint32_t)i, 100) == LE_DROP_QUEUE) {
			if (last >= 0) {
				int gap = i - last;
				sumgap += gap;
				ndrops++;
				maxgap = gap > maxgap ? gap : maxgap;
				mingap = gap < mingap ? gap : mingap;
			}
			last = i;
		}
	}
	double mean = sumgap / ndrops;
	CHECK(fabs(mean - 10.0) < 0.15, "mean gap %g over %d drops", mean, ndrops);
	CHECK(maxgap == 19 && mingap == 1, "gap range %d..%d", mingap, maxgap);
	le_queue_free(&q);

	/* Forced drops: gentle avg >= 2*max_th, non-gentle avg >= max_th, and
	 * qlen at limit regardless of avg. */
	c.limit_pkts = 1000;
	mkq(&q, &c);
	for (int i = 0; i < 5; i++)
		le_arrive(&q, 0, (uint32_t)i, 100);
	q.red_avg = 30.5;
	CHECK(le_arrive(&q, 0, 10, 100) == LE_DROP_QUEUE, "gentle forced at 2*max_th");
	q.red_avg = 29.0;
	q.cfg.gentle = 0;
	CHECK(le_arrive(&q, 0, 11, 100) == LE_DROP_QUEUE, "non-gentle forced above max_th");
	le_queue_free(&q);

	c.limit_pkts = 3;
	mkq(&q, &c);
	int admitted = 0;
	for (int i = 0; i < 10; i++)
		admitted += le_arrive(&q, 0, (uint32_t)i, 100) == LE_ADMIT;
	CHECK(admitted == 4 && le_qlen(&q) == 3, "RED limit: admitted %d", admitted);
	le_queue_free(&q);

	/* No early drop below min_th or when fewer than 2 packets wait. */
	le_cfg_defaults(&c);
	c.disc = LE_RED;
	c.rate_bps = 1000000;
	c.weight = 1e-12;
	mkq(&q, &c);
	q.red_avg = 14.0;
	int drops = 0;
	for (int i = 0; i < 2; i++)
		drops += le_arrive(&q, 0, (uint32_t)i, 100) != LE_ADMIT;
	CHECK(drops == 0, "qlen <= 1 never early-dropped");
	le_queue_free(&q);
}

static double run_loss(struct le_cfg *c, int n)
{
	struct le_queue q;
	struct le_pkt p;
	mkq(&q, c);
	for (int i = 0; i < n; i++) {
		le_arrive(&q, i, (uint32_t)i, 100);
		while (le_pop_due(&q, i, &p))
			;
	}
	double frac = (double)q.drops_loss / n;
	le_queue_free(&q);
	return frac;
}

static void test_loss(void)
{
	const int n = 1000000;
	const double ps[] = {0.01, 0.05};
	for (int k = 0; k < 2; k++) {
		for (uint64_t seed = 1; seed <= 3; seed++) {
			struct le_cfg c;
			le_cfg_defaults(&c);
			c.loss = ps[k];
			c.seed = seed;
			double f = run_loss(&c, n);
			double half = 2.576 * sqrt(ps[k] * (1 - ps[k]) / n);
			CHECK(fabs(f - ps[k]) <= half, "loss %g seed %llu: %g (99%% CI +-%g)", ps[k],
			      (unsigned long long)seed, f, half);
		}
	}
	struct le_cfg c;
	le_cfg_defaults(&c);
	CHECK(run_loss(&c, 100000) == 0.0, "no loss by default");
	c.loss = 1.0;
	CHECK(run_loss(&c, 1000) == 1.0, "loss=1 drops all");

	/* Same seed, same pattern; different queue, different pattern. */
	c.loss = 0.3;
	struct le_queue a, b, d;
	mkq(&a, &c);
	mkq(&b, &c);
	c.queue = 1;
	mkq(&d, &c);
	int same = 1, differ = 0;
	for (int i = 0; i < 1000; i++) {
		enum le_fate fa = le_arrive(&a, 0, 0, 1), fb = le_arrive(&b, 0, 0, 1);
		same &= fa == fb;
		differ |= fa != le_arrive(&d, 0, 0, 1);
	}
	CHECK(same && differ, "seeding: same=%d differ=%d", same, differ);
	le_queue_free(&a);
	le_queue_free(&b);
	le_queue_free(&d);
}

static void test_gilbert_elliott(void)
{
	struct le_cfg c;
	le_cfg_defaults(&c);
	c.ge_p = 0.01;
	c.ge_r = 0.1;
	c.ge_h = 0.3;  /* loss 0.7 in bad */
	c.ge_k = 0.99; /* loss 0.01 in good */
	c.seed = 11;
	double pib = c.ge_p / (c.ge_p + c.ge_r);
	double want = (1 - pib) * (1 - c.ge_k) + pib * (1 - c.ge_h);
	double f = run_loss(&c, 2000000);
	/* Losses are correlated (mean bad sojourn 10 packets), so allow about
	 * 5 sigma of the effective sample size rather than binomial. */
	CHECK(fabs(f - want) < 0.004, "GE loss %g want %g", f, want);

	/* Simple Gilbert (k=1, h=0): losses come in bursts of mean 1/r. */
	le_cfg_defaults(&c);
	c.ge_p = 0.02;
	c.ge_r = 0.25;
	c.ge_h = 0;
	c.seed = 3;
	struct le_queue q;
	mkq(&q, &c);
	long bursts = 0, lost = 0;
	int prev = 0;
	for (int i = 0; i < 1000000; i++) {
		int l = le_arrive(&q, 0, 0, 1) == LE_DROP_LOSS;
		lost += l;
		bursts += l && !prev;
		prev = l;
		q.head = q.wait = q.tail = 0; /* discard, keep memory flat */
	}
	double mean_burst = (double)lost / bursts;
	double rate = (double)lost / 1000000;
	CHECK(fabs(mean_burst - 4.0) < 0.15, "mean burst %g want 4", mean_burst);
	CHECK(fabs(rate - 0.02 / 0.27) < 0.004, "Gilbert loss %g want %g", rate, 0.02 / 0.27);
	le_queue_free(&q);
}

static void test_jitter_no_reorder(void)
{
	struct le_cfg c;
	le_cfg_defaults(&c);
	c.rate_bps = 10000000;
	c.delay_ns = 10 * MS;
	c.jitter_ns = 9 * MS;
	c.seed = 5;
	struct le_queue q;
	mkq(&q, &c);
	struct le_pkt p;
	uint32_t next_id = 0, expect = 0;
	int reorder = 0;
	int64_t lo = INT64_MAX, hi = 0, prev_due = 0;
	/* Dense phase (arrivals every 100 us, heavy clamping) then sparse
	 * (every 30 ms, jitter fully visible). */
	for (int64_t t = 0; t < 11000 * MS; t += (t < 1000 * MS ? 100 * US : 30 * MS)) {
		le_arrive(&q, t, next_id++, 100);
		while (le_pop_due(&q, t, &p)) {
			reorder |= p.id != expect++ || p.due < prev_due;
			prev_due = p.due;
		}
		if (t >= 1000 * MS) {
			int64_t d = q.ring[(q.tail - 1) & (q.cap - 1)].due - t - 80 * US;
			lo = d < lo ? d : lo;
			hi = d > hi ? d : hi;
		}
	}
	while (le_pop_due(&q, INT64_MAX - 1, &p)) {
		reorder |= p.id != expect++ || p.due < prev_due;
		prev_due = p.due;
	}
	CHECK(!reorder && expect == next_id, "order kept, %u of %u", expect, next_id);
	CHECK(lo >= 1 * MS && lo < 2 * MS && hi > 18 * MS && hi <= 19 * MS,
	      "jitter range %lld..%lld us", (long long)(lo / US), (long long)(hi / US));
	le_queue_free(&q);
}

static void test_control_protected(void)
{
	/* A full drop-tail queue and loss=1: data is dropped, a control packet
	 * (IGMP, PIM) is admitted behind the queue when protect_control is set,
	 * and dropped like data when it is not. */
	struct le_cfg c;
	le_cfg_defaults(&c);
	c.rate_bps = 1000000;
	c.limit_pkts = 5;
	c.protect_control = 1;
	struct le_queue q;
	mkq(&q, &c);
	int64_t t = 5 * MS;
	for (int i = 0; i < 20; i++)
		le_arrive(&q, t, (uint32_t)i, 1000);
	CHECK(le_qlen(&q) == 5 && q.drops_queue > 0, "queue full");
	uint64_t drops = q.drops_queue;
	CHECK(le_arrive(&q, t, 100, 1000) == LE_DROP_QUEUE, "data still dropped");
	CHECK(le_arrive_control(&q, t, 101, 60) == LE_ADMIT, "control admitted at a full queue");
	CHECK(q.drops_queue == drops + 1 && q.control_in == 1 && le_qlen(&q) == 6,
	      "counted: drops %llu control %llu qlen %llu", (unsigned long long)q.drops_queue,
	      (unsigned long long)q.control_in, (unsigned long long)le_qlen(&q));
	/* It waits its turn: due after the five data packets ahead of it. */
	struct le_pkt p;
	int64_t now = t;
	uint32_t order[8];
	int n = 0;
	while (n < 8 && le_next_due(&q) != INT64_MAX) {
		now = le_next_due(&q);
		while (le_pop_due(&q, now, &p))
			order[n++] = p.id;
	}
	CHECK(n == 7 && order[6] == 101, "control leaves last, %d out, last id %u", n,
	      n ? order[n - 1] : 0);
	le_queue_free(&q);

	c.protect_control = 0;
	mkq(&q, &c);
	for (int i = 0; i < 20; i++)
		le_arrive(&q, t, (uint32_t)i, 1000);
	CHECK(le_arrive_control(&q, t, 101, 60) == LE_DROP_QUEUE && q.control_in == 0,
	      "unprotected control is data");
	le_queue_free(&q);

	/* Loss and RED draw nothing for a protected packet. */
	c.protect_control = 1;
	c.loss = 1.0;
	mkq(&q, &c);
	CHECK(le_arrive(&q, t, 1, 1000) == LE_DROP_LOSS, "loss=1 drops data");
	CHECK(le_arrive_control(&q, t, 2, 60) == LE_ADMIT, "loss=1 spares control");
	le_queue_free(&q);
	c.loss = 0;
	c.disc = LE_RED;
	c.limit_pkts = 100;
	c.min_th = 0;
	c.max_th = 0.5;
	c.max_p = 1;
	c.weight = 1;
	c.gentle = 0;
	mkq(&q, &c);
	for (int i = 0; i < 10; i++)
		le_arrive(&q, t, (uint32_t)i, 1000);
	double avg = q.red_avg;
	CHECK(le_arrive(&q, t, 50, 1000) == LE_DROP_QUEUE, "RED above max_th drops data");
	CHECK(le_arrive_control(&q, t, 51, 60) == LE_ADMIT, "RED spares control");
	le_arrive(&q, t, 52, 1000);
	CHECK(q.control_in == 1 && avg > 0, "RED: avg %g", avg);
	le_queue_free(&q);

	/* Which packets are control: IPv4 IGMP and PIM only. */
	unsigned char ip[20] = {0x45};
	ip[9] = 2;
	CHECK(le_is_control(ip, 20), "IGMP");
	ip[9] = 103;
	CHECK(le_is_control(ip, 20), "PIM");
	ip[9] = 17;
	CHECK(!le_is_control(ip, 20), "UDP is data");
	ip[9] = 2;
	CHECK(!le_is_control(ip, 19), "short capture");
	ip[0] = 0x60;
	CHECK(!le_is_control(ip, 20), "IPv6 header");
}

static void test_config(void)
{
	struct le_cfg c;
	char err[512], line[512];

	strcpy(line, "queue=3 rate_bps=1000000 delay_us=50000 jitter_us=0 loss=0.01 ge_p=0 ge_r=1 "
		     "ge_h=0 ge_k=1 limit_pkts=40 disc=red min_th=5 max_th=15 max_p=0.1 "
		     "weight=0.002 gentle=1 seed=42 name=r1-eth0\n");
	CHECK(le_parse_line(line, &c, err, sizeof(err)) == 0, "example line: %s", err);
	CHECK(c.queue == 3 && c.rate_bps == 1000000 && c.delay_ns == 50 * MS && c.limit_pkts == 40 &&
		      c.disc == LE_RED && c.seed == 42 && !strcmp(c.name, "r1-eth0") && c.loss == 0.01 &&
		      !c.protect_control,
	      "example values");
	strcpy(line, "queue=3 protect_control=1\n");
	CHECK(le_parse_line(line, &c, err, sizeof(err)) == 0 && c.protect_control == 1,
	      "protect_control=1: %s", err);

	strcpy(line, "  # comment only\n");
	CHECK(le_parse_line(line, &c, err, sizeof(err)) == 1, "comment");
	strcpy(line, "queue=1 delay_us=2.5\n");
	CHECK(le_parse_line(line, &c, err, sizeof(err)) == 0 && c.delay_ns == 2500 &&
		      !strcmp(c.name, "q1"),
	      "fractional us, default name");

	const char *bad[][2] = {
		{"queue=1 colour=red", "key 'colour': unknown key"},
		{"queue=1 loss=1.5", "key 'loss': value '1.5' must be a probability"},
		{"queue=1 loss=abc", "key 'loss'"},
		{"queue=1 rate_bps=1.5", "key 'rate_bps'"},
		{"queue=1 rate_bps=-1", "key 'rate_bps'"},
		{"queue=70000", "key 'queue'"},
		{"rate_bps=1", "key 'queue': missing"},
		{"queue=1 disc=codel", "key 'disc'"},
		{"queue=1 disc=red min_th=20 max_th=10", "key 'max_th'"},
		{"queue=1 queue=2", "key 'queue': given twice"},
		{"queue=1 limit_pkts=0", "key 'limit_pkts'"},
		{"queue=1 name=a\"b", "key 'name'"},
		{"queue=1 weight=0", "key 'weight'"},
		{"queue=1 gentle=yes", "key 'gentle'"},
		{"queue=1 protect_control=2", "key 'protect_control': value '2' must be 0 or 1"},
		{"queue=1 delay_us", "expected key=value"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(line, sizeof(line), "%s\n", bad[i][0]);
		err[0] = 0;
		int r = le_parse_line(line, &c, err, sizeof(err));
		CHECK(r == -1 && strstr(err, bad[i][1]), "'%s' -> %d '%s'", bad[i][0], r, err);
	}
}

static void test_spin_budget(void)
{
	const int64_t t0 = 5 * 1000 * MS;
	struct le_spin s;
	le_spin_init(&s, 100 * US, 10 * MS, t0);
	CHECK(le_spin_now(&s, t0) == 100 * US, "spins while the budget lasts");
	/* 99 spins of 100 us: 9.9 ms, still under 10 ms */
	for (int i = 0; i < 99; i++)
		le_spin_used(&s, 100 * US, t0 + (i + 1) * MS);
	CHECK(le_spin_now(&s, t0 + 100 * MS) == 100 * US, "9.9 ms of 10 used: still spins");
	CHECK(s.exhausted == 0, "not exhausted yet");
	le_spin_used(&s, 100 * US, t0 + 101 * MS);
	CHECK(le_spin_now(&s, t0 + 102 * MS) == 0, "budget used up: no spin");
	CHECK(le_spin_now(&s, t0 + 999 * MS) == 0, "none for the rest of the window");
	CHECK(s.exhausted == 1, "one window exhausted");
	CHECK(le_spin_now(&s, t0 + 1000 * MS) == 100 * US, "the next window spins again");
	/* a quiet spell of 3.5 windows banks nothing: the window restarts whole */
	le_spin_used(&s, 10 * MS, t0 + 1001 * MS);
	CHECK(s.exhausted == 2, "exhausted in one go");
	CHECK(le_spin_now(&s, t0 + 4500 * MS) == 100 * US && s.used == 0, "new window after a gap");
	CHECK(s.window == t0 + 4000 * MS, "windows stay on the 1-s grid");
	le_spin_used(&s, 9 * MS, t0 + 4999 * MS);
	CHECK(le_spin_now(&s, t0 + 4999 * MS) == 100 * US, "9 ms of 10 at the window's end");
	/* no bound */
	le_spin_init(&s, 50 * US, 0, t0);
	le_spin_used(&s, 2000 * MS, t0 + 10 * MS);
	CHECK(le_spin_now(&s, t0 + 20 * MS) == 50 * US && s.exhausted == 0, "budget 0: no bound");
	/* never spin */
	le_spin_init(&s, 0, 10 * MS, t0);
	CHECK(le_spin_now(&s, t0) == 0, "spin 0: never");
}

/* The late-verdict ring: oldest first, the newest LE_LATE_EVENTS kept, every
 * event counted; and the threshold rule of --late-log-us. */
static int latelog_holds(const struct le_latelog *log, int64_t first, size_t n)
{
	/* events first..first+n-1, event k being due at k ms and out 300 us later */
	if (le_latelog_len(log) != n)
		return 0;
	for (size_t i = 0; i < n; i++) {
		const struct le_late_event *e = le_latelog_at(log, i);
		if (e->due != (first + (int64_t)i) * MS || e->released != e->due + 300 * US)
			return 0;
	}
	return 1;
}

static void test_latelog(void)
{
	struct le_latelog log;
	le_latelog_init(&log);
	CHECK(le_latelog_len(&log) == 0 && log.total == 0, "empty");
	struct le_latelog zeroed;
	memset(&zeroed, 0, sizeof(zeroed));
	CHECK(le_latelog_len(&zeroed) == 0, "a zeroed log is empty");

	for (int64_t k = 0; k < 3; k++)
		le_latelog_add(&log, k * MS, k * MS + 300 * US);
	CHECK(latelog_holds(&log, 0, 3) && log.total == 3, "partial fill, oldest first");

	for (int64_t k = 3; k < LE_LATE_EVENTS; k++)
		le_latelog_add(&log, k * MS, k * MS + 300 * US);
	CHECK(latelog_holds(&log, 0, LE_LATE_EVENTS) && log.total == LE_LATE_EVENTS,
	      "exactly full");

	le_latelog_add(&log, LE_LATE_EVENTS * MS, LE_LATE_EVENTS * MS + 300 * US);
	CHECK(latelog_holds(&log, 1, LE_LATE_EVENTS) && log.total == LE_LATE_EVENTS + 1,
	      "one past full: the oldest dropped");

	for (int64_t k = LE_LATE_EVENTS + 1; k < 1000; k++)
		le_latelog_add(&log, k * MS, k * MS + 300 * US);
	CHECK(latelog_holds(&log, 1000 - LE_LATE_EVENTS, LE_LATE_EVENTS) && log.total == 1000,
	      "after several wraps: newest %d in order, total %llu", LE_LATE_EVENTS,
	      (unsigned long long)log.total);

	/* Threshold: lateness >= threshold is logged, 0 turns logging off. */
	le_latelog_init(&log);
	const int64_t due = 7 * MS, thr = 500 * US;
	CHECK(!le_latelog_note(&log, thr, due, due + thr - 1), "1 ns under the threshold");
	CHECK(!le_latelog_note(&log, thr, due, due), "on time");
	CHECK(le_latelog_note(&log, thr, due, due + thr), "exactly at the threshold");
	CHECK(le_latelog_note(&log, thr, due, due + 25 * MS), "25 ms late");
	CHECK(!le_latelog_note(&log, 0, due, due + 25 * MS), "threshold 0: off");
	CHECK(le_latelog_note(&log, 1 * US, due, due + 1 * US), "threshold 1 us");
	CHECK(log.total == 3 && le_latelog_len(&log) == 3 &&
		      le_latelog_at(&log, 0)->released == due + thr &&
		      le_latelog_at(&log, 1)->released == due + 25 * MS &&
		      le_latelog_at(&log, 2)->released == due + 1 * US,
	      "only the logged events, in order");
}

int main(void)
{
	test_serialization();
	test_droptail();
	test_red_formulas();
	test_red_avg();
	test_red_drops();
	test_loss();
	test_gilbert_elliott();
	test_jitter_no_reorder();
	test_control_protected();
	test_config();
	test_spin_budget();
	test_latelog();
	printf("%d passed, %d failed\n", passed, failed);
	return failed != 0;
}
