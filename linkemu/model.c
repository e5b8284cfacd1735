#include "model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void le_cfg_defaults(struct le_cfg *c)
{
	memset(c, 0, sizeof(*c));
	c->ge_r = 1.0;
	c->ge_k = 1.0;
	c->limit_pkts = 1000;
	c->disc = LE_DROPTAIL;
	/* ns-2's Queue/RED defaults, so a bare disc=red behaves like ns-2. */
	c->min_th = 5;
	c->max_th = 15;
	c->max_p = 0.1;
	c->weight = 0.002;
	c->gentle = 1;
	c->mean_pktsize = 500;
	c->seed = 1;
}

static uint64_t mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

void le_rng_seed(struct le_rng *r, uint64_t seed, uint64_t stream)
{
	r->x = mix64(seed ^ mix64(stream + 0x9e3779b97f4a7c15ULL));
}

uint64_t le_rng_next(struct le_rng *r)
{
	r->x += 0x9e3779b97f4a7c15ULL;
	return mix64(r->x);
}

double le_rng_uniform(struct le_rng *r)
{
	return (double)(le_rng_next(r) >> 11) * 0x1.0p-53;
}

int le_queue_init(struct le_queue *q, const struct le_cfg *cfg)
{
	memset(q, 0, sizeof(*q));
	q->cfg = *cfg;
	/* The queue number is folded in so that two links given the same seed
	 * still see independent loss patterns. */
	uint64_t base = (uint64_t)cfg->queue << 8;
	le_rng_seed(&q->rng_loss, cfg->seed, base | 1);
	le_rng_seed(&q->rng_ge, cfg->seed, base | 2);
	le_rng_seed(&q->rng_red, cfg->seed, base | 3);
	le_rng_seed(&q->rng_jit, cfg->seed, base | 4);
	q->cap = 1024;
	q->ring = calloc(q->cap, sizeof(*q->ring));
	q->link_free = INT64_MIN;
	q->last_due = INT64_MIN;
	return q->ring ? 0 : -1;
}

void le_queue_free(struct le_queue *q)
{
	free(q->ring);
	q->ring = NULL;
}

static int ring_grow(struct le_queue *q)
{
	uint64_t ncap = q->cap * 2;
	struct le_pkt *n = calloc(ncap, sizeof(*n));
	if (!n)
		return -1;
	for (uint64_t i = q->head; i < q->tail; i++)
		n[i & (ncap - 1)] = q->ring[i & (q->cap - 1)];
	free(q->ring);
	q->ring = n;
	q->cap = ncap;
	return 0;
}

int64_t le_tx_time_ns(uint64_t rate_bps, uint32_t len)
{
	if (rate_bps == 0)
		return 0;
	return (int64_t)((uint64_t)len * 8ULL * 1000000000ULL / rate_bps);
}

void le_advance(struct le_queue *q, int64_t now)
{
	while (q->wait < q->tail) {
		struct le_pkt *p = &q->ring[q->wait & (q->cap - 1)];
		if (p->tx_start > now)
			break;
		q->qlen_bytes -= p->len;
		q->wait++;
	}
}

double le_red_pb(const struct le_cfg *c, double avg)
{
	double p;
	if (avg < c->min_th)
		return 0.0;
	if (avg >= c->max_th) {
		if (!c->gentle)
			return 1.0;
		p = c->max_p + (1.0 - c->max_p) * (avg - c->max_th) / c->max_th;
	} else {
		p = c->max_p * (avg - c->min_th) / (c->max_th - c->min_th);
	}
	return p > 1.0 ? 1.0 : p;
}

double le_red_pa(const struct le_cfg *c, double pb, int count)
{
	double cp = count * pb;
	double p;
	if (c->wait) {
		/* ns-2 wait_=true: enforce a gap of roughly 1/pb between drops. */
		if (cp < 1.0)
			p = 0.0;
		else if (cp < 2.0)
			p = pb / (2.0 - cp);
		else
			p = 1.0;
	} else {
		p = cp < 1.0 ? pb / (1.0 - cp) : 1.0;
	}
	return p > 1.0 ? 1.0 : p;
}

double le_red_update_avg(const struct le_queue *q, int64_t now, uint64_t qlen)
{
	const struct le_cfg *c = &q->cfg;
	double avg = q->red_avg;
	double w = c->weight;
	if (now >= q->link_free && q->link_free != INT64_MIN) {
		/* ns-2: an idle link is treated as if m small packets had been
		 * sent, m = idle time / transmission time of mean_pktsize. */
		double idle_s = (double)(now - q->link_free) * 1e-9;
		double m;
		if (c->rate_bps)
			m = floor(idle_s * (double)c->rate_bps / (8.0 * c->mean_pktsize));
		else
			m = idle_s > 0 ? INFINITY : 0.0;
		avg *= pow(1.0 - w, m);
	}
	return (1.0 - w) * avg + w * (double)qlen;
}

/* Returns 1 if the arrival must be dropped; ns-2 REDQueue::enque logic. */
static int red_drop(struct le_queue *q, int64_t now, uint64_t qlen)
{
	const struct le_cfg *c = &q->cfg;
	int forced = 0, early = 0;

	q->red_avg = le_red_update_avg(q, now, qlen);
	double avg = q->red_avg;
	q->red_count++;

	if (avg >= c->min_th && qlen > 1) {
		if ((!c->gentle && avg >= c->max_th) || (c->gentle && avg >= 2 * c->max_th)) {
			forced = 1;
		} else if (!q->red_old) {
			/* avg just crossed min_th: restart the inter-drop count. */
			q->red_count = 1;
			q->red_old = 1;
		} else {
			double pa = le_red_pa(c, le_red_pb(c, avg), q->red_count);
			if (le_rng_uniform(&q->rng_red) < pa) {
				early = 1;
				q->red_count = 0;
			}
		}
	} else {
		q->red_old = 0;
	}
	if (qlen >= c->limit_pkts)
		forced = 1;
	if (forced)
		q->red_count = 0;
	return forced || early;
}

static int lost(struct le_queue *q)
{
	const struct le_cfg *c = &q->cfg;
	int ge_lost = 0;
	if (c->ge_p > 0 || c->ge_k < 1) {
		/* Transition first, then decide loss in the new state. */
		double u = le_rng_uniform(&q->rng_ge);
		if (q->ge_bad) {
			if (u < c->ge_r)
				q->ge_bad = 0;
		} else if (u < c->ge_p) {
			q->ge_bad = 1;
		}
		double keep = q->ge_bad ? c->ge_h : c->ge_k;
		ge_lost = le_rng_uniform(&q->rng_ge) >= keep;
	}
	int bern_lost = c->loss > 0 && le_rng_uniform(&q->rng_loss) < c->loss;
	return ge_lost || bern_lost;
}

int le_is_control(const unsigned char *pkt, size_t caplen)
{
	/* IPv4 (version 4, header at least 20 bytes), protocol IGMP (2) or PIM (103). */
	return caplen >= 20 && pkt[0] >> 4 == 4 && (pkt[9] == 2 || pkt[9] == 103);
}

static enum le_fate arrive(struct le_queue *q, int64_t now, uint32_t id, uint32_t len,
			   int control)
{
	const struct le_cfg *c = &q->cfg;

	le_advance(q, now);
	q->pkts_in++;
	q->bytes_in += len;
	int spared = control && c->protect_control;

	/* A spared packet draws no loss and no RED decision: the data's loss
	 * process and RED's state are as if it had not been there. */
	if (!spared && lost(q)) {
		q->drops_loss++;
		return LE_DROP_LOSS;
	}

	uint64_t qlen = le_qlen(q);
	int drop = spared ? 0 : c->disc == LE_RED ? red_drop(q, now, qlen) : qlen >= c->limit_pkts;
	if (drop || (q->tail - q->head == q->cap && ring_grow(q) < 0)) {
		q->drops_queue++;
		return LE_DROP_QUEUE;
	}

	struct le_pkt *p = &q->ring[q->tail & (q->cap - 1)];
	p->id = id;
	p->len = len;
	/* Starting at max(now, link_free) means an idle transmitter earns no
	 * credit: a burst after silence is still paced at rate_bps. */
	p->tx_start = now > q->link_free ? now : q->link_free;
	int64_t tx_end = p->tx_start + le_tx_time_ns(c->rate_bps, len);
	q->link_free = tx_end;

	int64_t d = c->delay_ns;
	if (c->jitter_ns > 0) {
		double u = le_rng_uniform(&q->rng_jit);
		d += (int64_t)((2.0 * u - 1.0) * (double)c->jitter_ns);
		if (d < 0)
			d = 0;
	}
	int64_t due = tx_end + d;
	/* Jitter must not reorder: hold a packet behind a later predecessor. */
	if (due < q->last_due)
		due = q->last_due;
	p->due = due;
	q->last_due = due;

	q->tail++;
	q->qlen_bytes += len;
	q->control_in += spared;
	le_advance(q, now);
	if (le_qlen(q) > q->max_qlen)
		q->max_qlen = le_qlen(q);
	return LE_ADMIT;
}

enum le_fate le_arrive(struct le_queue *q, int64_t now, uint32_t id, uint32_t len)
{
	return arrive(q, now, id, len, 0);
}

enum le_fate le_arrive_control(struct le_queue *q, int64_t now, uint32_t id, uint32_t len)
{
	return arrive(q, now, id, len, 1);
}

int le_pop_due(struct le_queue *q, int64_t now, struct le_pkt *out)
{
	/* Advancing first keeps wait >= head: due >= tx_start, so a due
	 * packet has always left the waiting queue. */
	le_advance(q, now);
	if (q->head == q->tail)
		return 0;
	struct le_pkt *p = &q->ring[q->head & (q->cap - 1)];
	if (p->due > now)
		return 0;
	*out = *p;
	q->head++;
	q->pkts_out++;
	q->bytes_out += out->len;
	return 1;
}

int64_t le_next_due(const struct le_queue *q)
{
	if (q->head == q->tail)
		return INT64_MAX;
	return q->ring[q->head & (q->cap - 1)].due;
}

void le_spin_init(struct le_spin *s, int64_t spin_ns, int64_t budget_ns, int64_t now)
{
	s->spin_ns = spin_ns;
	s->budget_ns = budget_ns;
	s->window = now;
	s->used = 0;
	s->exhausted = 0;
}

static void spin_roll(struct le_spin *s, int64_t now)
{
	if (now - s->window >= LE_SPIN_WINDOW_NS) {
		/* Whole windows: a quiet spell does not bank budget for later. */
		s->window += (now - s->window) / LE_SPIN_WINDOW_NS * LE_SPIN_WINDOW_NS;
		s->used = 0;
	}
}

int64_t le_spin_now(struct le_spin *s, int64_t now)
{
	spin_roll(s, now);
	if (s->budget_ns && s->used >= s->budget_ns)
		return 0;
	return s->spin_ns;
}

void le_spin_used(struct le_spin *s, int64_t ns, int64_t now)
{
	spin_roll(s, now);
	int64_t before = s->used;
	s->used += ns;
	if (s->budget_ns && before < s->budget_ns && s->used >= s->budget_ns)
		s->exhausted++;
}

void le_latelog_init(struct le_latelog *log)
{
	memset(log, 0, sizeof(*log));
}

/* The ring's state is its total alone: the next slot is total mod the size,
 * and once it has wrapped that slot also holds the oldest event. */
void le_latelog_add(struct le_latelog *log, int64_t due_ns, int64_t released_ns)
{
	struct le_late_event *e = &log->ev[log->total % LE_LATE_EVENTS];
	e->due = due_ns;
	e->released = released_ns;
	log->total++;
}

int le_latelog_note(struct le_latelog *log, int64_t threshold_ns, int64_t due_ns,
		    int64_t released_ns)
{
	if (threshold_ns <= 0 || released_ns - due_ns < threshold_ns)
		return 0;
	le_latelog_add(log, due_ns, released_ns);
	return 1;
}

size_t le_latelog_len(const struct le_latelog *log)
{
	return log->total < LE_LATE_EVENTS ? (size_t)log->total : LE_LATE_EVENTS;
}

const struct le_late_event *le_latelog_at(const struct le_latelog *log, size_t i)
{
	uint64_t oldest = log->total < LE_LATE_EVENTS ? 0 : log->total % LE_LATE_EVENTS;
	return &log->ev[(oldest + i) % LE_LATE_EVENTS];
}
