#ifndef LINKEMU_CONFIG_H
#define LINKEMU_CONFIG_H

#include <stddef.h>

#include "model.h"

/* Parses a config file (one queue per line, key=value tokens, '#' starts a
 * comment).  On error returns -1 and writes a message naming the file, line
 * and key into err. */
int le_parse_config(const char *path, struct le_cfg **out, size_t *n, char *err, size_t errlen);

/* Parses a single line into *c (defaults applied first); returns 0 if the
 * line holds a queue, 1 if it is blank or a comment, -1 on error. */
int le_parse_line(char *line, struct le_cfg *c, char *err, size_t errlen);

#endif
