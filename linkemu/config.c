#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int num(const char *v, double lo, double hi, double *out)
{
	char *end;
	errno = 0;
	double d = strtod(v, &end);
	if (errno || end == v || *end || !isfinite(d) || d < lo || d > hi)
		return -1;
	*out = d;
	return 0;
}

static int integer(const char *v, double lo, double hi, double *out)
{
	if (num(v, lo, hi, out) < 0 || *out != floor(*out))
		return -1;
	return 0;
}

static int valid_name(const char *v)
{
	/* Restricted so names can go into the JSON stats unescaped. */
	if (!*v || strlen(v) >= sizeof(((struct le_cfg *)0)->name))
		return 0;
	for (; *v; v++)
		if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:@-", *v))
			return 0;
	return 1;
}

#define KEYS                                                                           \
	X(queue) X(name) X(rate_bps) X(delay_us) X(jitter_us) X(loss) X(ge_p) X(ge_r)  \
	X(ge_h) X(ge_k) X(limit_pkts) X(disc) X(min_th) X(max_th) X(max_p) X(weight) \
	X(gentle) X(wait) X(mean_pktsize) X(seed) X(protect_control)

enum key {
#define X(k) K_##k,
	KEYS
#undef X
	K_COUNT
};
static const char *const key_names[] = {
#define X(k) #k,
	KEYS
#undef X
};

/* Returns NULL on success or a description of what the value must be. */
static const char *set_key(struct le_cfg *c, enum key k, const char *v)
{
	double d;
	switch (k) {
	case K_queue:
		if (integer(v, 0, 65535, &d))
			return "must be an integer in [0, 65535]";
		c->queue = (unsigned)d;
		return NULL;
	case K_name:
		if (!valid_name(v))
			return "must be 1-63 characters from [A-Za-z0-9._:@-]";
		strcpy(c->name, v);
		return NULL;
	case K_rate_bps:
		if (integer(v, 0, 1e12, &d))
			return "must be an integer number of bit/s in [0, 1e12] (0 = unlimited)";
		c->rate_bps = (uint64_t)d;
		return NULL;
	case K_delay_us:
	case K_jitter_us:
		if (num(v, 0, 60e6, &d))
			return "must be a number of microseconds in [0, 60e6]";
		*(k == K_delay_us ? &c->delay_ns : &c->jitter_ns) = (int64_t)llround(d * 1000.0);
		return NULL;
	case K_loss:
	case K_ge_p:
	case K_ge_r:
	case K_ge_h:
	case K_ge_k:
		if (num(v, 0, 1, &d))
			return "must be a probability in [0, 1]";
		*(k == K_loss   ? &c->loss
		  : k == K_ge_p ? &c->ge_p
		  : k == K_ge_r ? &c->ge_r
		  : k == K_ge_h ? &c->ge_h
				: &c->ge_k) = d;
		return NULL;
	case K_limit_pkts:
		if (integer(v, 1, 1000000, &d))
			return "must be an integer in [1, 1000000]";
		c->limit_pkts = (unsigned)d;
		return NULL;
	case K_disc:
		if (!strcmp(v, "droptail"))
			c->disc = LE_DROPTAIL;
		else if (!strcmp(v, "red"))
			c->disc = LE_RED;
		else
			return "must be droptail or red";
		return NULL;
	case K_min_th:
	case K_max_th:
		if (num(v, 0, 1000000, &d))
			return "must be a number of packets in [0, 1e6]";
		*(k == K_min_th ? &c->min_th : &c->max_th) = d;
		return NULL;
	case K_max_p:
	case K_weight:
		if (num(v, 0, 1, &d) || d == 0)
			return "must be a number in (0, 1]";
		*(k == K_max_p ? &c->max_p : &c->weight) = d;
		return NULL;
	case K_gentle:
	case K_wait:
	case K_protect_control:
		if (strcmp(v, "0") && strcmp(v, "1"))
			return "must be 0 or 1";
		*(k == K_gentle ? &c->gentle : k == K_wait ? &c->wait : &c->protect_control) =
			v[0] == '1';
		return NULL;
	case K_mean_pktsize:
		if (integer(v, 1, 65535, &d))
			return "must be an integer number of bytes in [1, 65535]";
		c->mean_pktsize = (unsigned)d;
		return NULL;
	case K_seed:
		if (integer(v, 0, 9007199254740992.0, &d))
			return "must be an integer in [0, 2^53]";
		c->seed = (uint64_t)d;
		return NULL;
	case K_COUNT:
		break;
	}
	return "unknown key";
}

int le_parse_line(char *line, struct le_cfg *c, char *err, size_t errlen)
{
	int seen[K_COUNT] = {0};
	char *hash = strchr(line, '#');
	if (hash)
		*hash = '\0';

	le_cfg_defaults(c);
	int any = 0;
	char *save = NULL;
	for (char *tok = strtok_r(line, " \t\r\n", &save); tok; tok = strtok_r(NULL, " \t\r\n", &save)) {
		any = 1;
		char *eq = strchr(tok, '=');
		if (!eq) {
			snprintf(err, errlen, "token '%s': expected key=value", tok);
			return -1;
		}
		*eq = '\0';
		const char *v = eq + 1;
		int k;
		for (k = 0; k < K_COUNT && strcmp(tok, key_names[k]); k++)
			;
		if (k == K_COUNT) {
			snprintf(err, errlen, "key '%s': unknown key", tok);
			return -1;
		}
		if (seen[k]++) {
			snprintf(err, errlen, "key '%s': given twice", tok);
			return -1;
		}
		const char *why = set_key(c, (enum key)k, v);
		if (why) {
			snprintf(err, errlen, "key '%s': value '%s' %s", tok, v, why);
			return -1;
		}
	}
	if (!any)
		return 1;
	if (!seen[K_queue]) {
		snprintf(err, errlen, "key 'queue': missing");
		return -1;
	}
	if (c->disc == LE_RED && !(c->min_th < c->max_th)) {
		snprintf(err, errlen, "key 'max_th': must be greater than min_th");
		return -1;
	}
	if (!seen[K_name])
		snprintf(c->name, sizeof(c->name), "q%u", c->queue);
	return 0;
}

int le_parse_config(const char *path, struct le_cfg **out, size_t *n, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	struct le_cfg *v = NULL;
	size_t cnt = 0;
	char line[4096], why[512];
	int lineno = 0, rc = 0;
	while (fgets(line, sizeof(line), f)) {
		lineno++;
		if (!strchr(line, '\n') && !feof(f)) {
			snprintf(err, errlen, "%s:%d: line too long", path, lineno);
			rc = -1;
			break;
		}
		struct le_cfg c;
		int r = le_parse_line(line, &c, why, sizeof(why));
		if (r < 0) {
			snprintf(err, errlen, "%s:%d: %s", path, lineno, why);
			rc = -1;
			break;
		}
		if (r > 0)
			continue;
		for (size_t i = 0; i < cnt; i++) {
			if (v[i].queue == c.queue) {
				snprintf(err, errlen, "%s:%d: key 'queue': queue %u already defined", path,
					 lineno, c.queue);
				rc = -1;
				break;
			}
		}
		if (rc)
			break;
		struct le_cfg *nv = realloc(v, (cnt + 1) * sizeof(*v));
		if (!nv) {
			snprintf(err, errlen, "out of memory");
			rc = -1;
			break;
		}
		v = nv;
		v[cnt++] = c;
	}
	fclose(f);
	if (!rc && cnt == 0) {
		snprintf(err, errlen, "%s: no queues defined", path);
		rc = -1;
	}
	if (rc) {
		free(v);
		return -1;
	}
	*out = v;
	*n = cnt;
	return 0;
}
