/* A host linked statically against the installed libjettprof-agent.a through
 * `pkg-config --static`: proves the archive and its pkg-config file are enough. It starts one
 * run with a configuration the agent must refuse (that path links the daemon connection code
 * and its msgpack control messages) and checks the stable error. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <jettprof.h>

int main(void)
{
    struct jettprof_config cfg = {.size = sizeof cfg, .mode = 99};
    jettprof_run *run = NULL;
    int r = jettprof_start(&cfg, &run);
    if (r != -EINVAL || run) {
        fprintf(stderr, "jettprof_start gave %d, expected %d\n", r, -EINVAL);
        return 1;
    }
    if (strcmp(jettprof_strerror(r), "profiler: invalid argument") != 0) {
        fprintf(stderr, "unexpected message: %s\n", jettprof_strerror(r));
        return 1;
    }
    printf("static host: %s (%s)\n", jettprof_strerror(r), jettprof_last_reason());
    return 0;
}
