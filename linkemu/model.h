/* Link model: loss, queue admission (drop-tail or RED), serialization and
 * propagation delay for one emulated link direction.  Everything here is a
 * pure function of the state struct and the time passed in, so it can be
 * unit tested without netlink (see tests/test_model.c). */
#ifndef LINKEMU_MODEL_H
#define LINKEMU_MODEL_H

#include <stddef.h>
#include <stdint.h>

enum le_disc { LE_DROPTAIL, LE_RED };

struct le_cfg {
	unsigned queue;
	char name[64];
	uint64_t rate_bps; /* 0 = unlimited */
	int64_t delay_ns;
	int64_t jitter_ns;
	double loss;
	double ge_p, ge_r, ge_h, ge_k;
	unsigned limit_pkts;
	enum le_disc disc;
	double min_th, max_th, max_p, weight;
	int gentle;
	int wait;
	unsigned mean_pktsize;
	uint64_t seed;
	/* 1: control packets (le_arrive_control: IGMP, PIM) are never dropped,
	 * neither by loss nor by the queue; they still queue, serialize and
	 * propagate like data. A router's own control traffic must not be lost
	 * to the emulated data plane's congestion (see README). */
	int protect_control;
};

void le_cfg_defaults(struct le_cfg *c);

/* splitmix64: tiny, fast and statistically good enough for drop decisions;
 * one independent stream per purpose so that e.g. enabling jitter does not
 * change which packets a seeded loss process drops. */
struct le_rng {
	uint64_t x;
};
void le_rng_seed(struct le_rng *r, uint64_t seed, uint64_t stream);
uint64_t le_rng_next(struct le_rng *r);
double le_rng_uniform(struct le_rng *r); /* [0, 1) */

struct le_pkt {
	uint32_t id;
	uint32_t len;
	int64_t tx_start; /* when serialization begins */
	int64_t due;      /* when the verdict is issued */
};

enum le_fate { LE_ADMIT, LE_DROP_LOSS, LE_DROP_QUEUE };

struct le_queue {
	struct le_cfg cfg;
	struct le_rng rng_loss, rng_ge, rng_red, rng_jit;
	int ge_bad;

	/* Ring of admitted packets awaiting their verdict, in FIFO order.
	 * head..wait: serialization started (on the wire or propagating);
	 * wait..tail: still waiting for the transmitter (the "queue"). */
	struct le_pkt *ring;
	uint64_t cap; /* power of two */
	uint64_t head, wait, tail;
	uint64_t qlen_bytes;

	int64_t link_free; /* transmitter busy until then */
	int64_t last_due;

	double red_avg;
	int red_count;
	int red_old;

	uint64_t pkts_in, bytes_in, pkts_out, bytes_out;
	uint64_t drops_queue, drops_loss, max_qlen;
	uint64_t control_in; /* control packets admitted under protect_control */
};

int le_queue_init(struct le_queue *q, const struct le_cfg *cfg);
void le_queue_free(struct le_queue *q);

/* Processes an arrival at time now.  On LE_ADMIT the packet is stored and
 * will be returned by le_pop_due() once due. */
enum le_fate le_arrive(struct le_queue *q, int64_t now, uint32_t id, uint32_t len);

/* le_arrive() for a control packet: with cfg.protect_control it skips the
 * loss draw and the queue's drop decision (only a ring that cannot grow
 * drops it); without, it is le_arrive(). */
enum le_fate le_arrive_control(struct le_queue *q, int64_t now, uint32_t id, uint32_t len);

/* Whether an IPv4 packet (its first caplen bytes) is IGMP or PIM. */
int le_is_control(const unsigned char *pkt, size_t caplen);

/* Moves packets whose serialization has begun out of the waiting queue. */
void le_advance(struct le_queue *q, int64_t now);

/* Returns 1 and fills *out if the oldest packet is due at now. */
int le_pop_due(struct le_queue *q, int64_t now, struct le_pkt *out);

/* Due time of the oldest stored packet, INT64_MAX if none. */
int64_t le_next_due(const struct le_queue *q);

static inline uint64_t le_qlen(const struct le_queue *q) { return q->tail - q->wait; }
static inline uint64_t le_in_flight(const struct le_queue *q) { return q->tail - q->head; }

int64_t le_tx_time_ns(uint64_t rate_bps, uint32_t len);

/* Spinning (--spin-us) bounded per second of wall time: at most budget_ns of
 * busy-waiting in each window of LE_SPIN_WINDOW_NS. A spinning emulator runs at
 * real-time priority, so without a bound a busy one (many slow links, each
 * verdict spun) took most of a core from everything else. */
#define LE_SPIN_WINDOW_NS 1000000000LL
struct le_spin {
	int64_t spin_ns;   /* how long before a verdict to wake and busy-wait (0: never) */
	int64_t budget_ns; /* busy-waiting allowed per window (0: no bound) */
	int64_t window;    /* start of the current window */
	int64_t used;      /* busy-waiting so far in it */
	uint64_t exhausted; /* windows in which the budget ran out */
};
void le_spin_init(struct le_spin *s, int64_t spin_ns, int64_t budget_ns, int64_t now);
/* The spin to use now: spin_ns, or 0 once this window's budget is used up. */
int64_t le_spin_now(struct le_spin *s, int64_t now);
/* Account ns of busy-waiting that ended at now. */
void le_spin_used(struct le_spin *s, int64_t ns, int64_t now);

/* Late-verdict events (--late-log-us): the due time and the release time of each
 * verdict that went out at least a threshold late, so that measurements made
 * across a span in which the machine held the emulator up can be set aside.
 * A fixed ring of the most recent LE_LATE_EVENTS per queue: adding never
 * allocates and never makes a system call, and a zeroed struct is empty.
 * Times are whatever clock the caller uses (the loop: CLOCK_MONOTONIC ns). */
#define LE_LATE_EVENTS 256
struct le_late_event {
	int64_t due;      /* when the model wanted the verdict out */
	int64_t released; /* when it went out */
};
struct le_latelog {
	struct le_late_event ev[LE_LATE_EVENTS];
	uint64_t total; /* events ever added, including those overwritten since */
};
void le_latelog_init(struct le_latelog *log);
/* Adds an event, overwriting the oldest once the ring is full. */
void le_latelog_add(struct le_latelog *log, int64_t due_ns, int64_t released_ns);
/* The threshold rule: adds the event if released_ns - due_ns >= threshold_ns;
 * threshold_ns <= 0 means logging is off. Returns 1 if it was added. */
int le_latelog_note(struct le_latelog *log, int64_t threshold_ns, int64_t due_ns,
		    int64_t released_ns);
/* Events held now (at most LE_LATE_EVENTS), and the i-th of them, oldest first
 * (i < le_latelog_len). */
size_t le_latelog_len(const struct le_latelog *log);
const struct le_late_event *le_latelog_at(const struct le_latelog *log, size_t i);

/* ns-2 RED pieces, exposed for tests. */
double le_red_pb(const struct le_cfg *c, double avg);
double le_red_pa(const struct le_cfg *c, double pb, int count);
double le_red_update_avg(const struct le_queue *q, int64_t now, uint64_t qlen);

#endif
