/* failalloc: an allocation-failure injector for tests, loaded with LD_PRELOAD.
 *
 * It counts every call to malloc, calloc, realloc, posix_memalign, aligned_alloc, memalign,
 * valloc, pvalloc, strdup and strndup that the process makes once it has started (this
 * library's constructor ran: the dynamic loader's own allocations before then are not
 * counted), and makes the N-th of them fail as an allocator out of memory would: NULL (or
 * ENOMEM from posix_memalign) with errno = ENOMEM. Only that one call fails; later ones
 * succeed, so a program that handles the failure goes on.
 *
 *   FAILALLOC_AT=N          fail the N-th counted call (1-based); unset or 0: fail none
 *   FAILALLOC_COUNT_FILE=P  at exit, write the number of counted calls to P (decimal, "\n")
 *   FAILALLOC_TRACE=1       print the failing call's stack on stderr (to find its caller)
 *
 * A test learns the total from a run without FAILALLOC_AT, then runs once for every N.
 * strdup and strndup count as one call each (under a sanitizer runtime they would otherwise
 * bypass malloc and go uncounted). Each call goes on to the next definition in the lookup
 * order (RTLD_NEXT): glibc's allocator, or a sanitizer's when one is loaded after this library
 * (ASan needs ASAN_OPTIONS=verify_asan_link_order=0 to accept that order), so free() stays
 * the matching one. Until those are found, allocations come from a static arena that free()
 * and realloc() recognise: before this library's constructor (a sanitizer runtime starts up
 * first, inside its own dlsym calls, where calling dlsym again would jump through its not yet
 * initialised interceptor), and while dlsym itself looks them up. */
#include <dlfcn.h>
#include <execinfo.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void *malloc(size_t n);
void *calloc(size_t k, size_t n);
void *realloc(void *p, size_t n);
void free(void *p);
int posix_memalign(void **out, size_t align, size_t n);
void *aligned_alloc(size_t align, size_t n);
void *memalign(size_t align, size_t n);
void *valloc(size_t n);
void *pvalloc(size_t n);
char *strdup(const char *s);
char *strndup(const char *s, size_t n);

static void *(*next_malloc)(size_t);
static void *(*next_calloc)(size_t, size_t);
static void *(*next_realloc)(void *, size_t);
static void (*next_free)(void *);
static void *(*next_memalign)(size_t, size_t);

static uint64_t counted; /* calls so far, atomic */
static uint64_t fail_at; /* written once by the constructor */
static int started;      /* the constructor ran: count from now on */
static int may_resolve;  /* the constructor began: dlsym can be called */
static const char *count_file;
static int trace;

/* Allocations made before the next definitions are known: bump allocated, never freed. */
static _Alignas(16) unsigned char arena[1u << 20];
static size_t arena_used; /* atomic */
/* initial-exec: a library loaded at startup has static TLS, and the general model would call
 * __tls_get_addr, which a sanitizer intercepts and cannot forward before it is initialised. */
static __thread int resolving __attribute__((tls_model("initial-exec")));

static int in_arena(const void *p)
{
    return (const unsigned char *)p >= arena && (const unsigned char *)p < arena + sizeof arena;
}

/* align: a power of two. Over-allocates by align so any start can be rounded up. */
static void *arena_alloc_aligned(size_t align, size_t n)
{
    if (align < 16)
        align = 16;
    if (n > sizeof arena || align > sizeof arena / 4)
        return NULL;
    size_t need = ((n + 15) & ~(size_t)15) + align - 16;
    size_t at = __atomic_fetch_add(&arena_used, need, __ATOMIC_RELAXED);
    if (at > sizeof arena - need)
        return NULL;
    uintptr_t p = ((uintptr_t)(arena + at) + align - 1) & ~(uintptr_t)(align - 1);
    return (void *)p;
}

static void *arena_alloc(size_t n)
{
    return arena_alloc_aligned(16, n);
}

/* dlsym gives an object pointer; POSIX guarantees it converts to a function pointer, which
 * ISO C says nothing of: copy the bits. */
#define LOOKUP(var, name)                                                                         \
    do {                                                                                          \
        void *sym_ = dlsym(RTLD_NEXT, name);                                                      \
        memcpy(&(var), &sym_, sizeof sym_);                                                       \
    } while (0)

/* 1 once the next definitions are known; 0 while they cannot be looked up yet. */
static int resolve(void)
{
    if (__atomic_load_n(&next_malloc, __ATOMIC_ACQUIRE))
        return 1;
    if (resolving || !__atomic_load_n(&may_resolve, __ATOMIC_ACQUIRE))
        return 0;
    resolving = 1;
    LOOKUP(next_calloc, "calloc");
    LOOKUP(next_realloc, "realloc");
    LOOKUP(next_free, "free");
    LOOKUP(next_memalign, "memalign");
    void *(*m)(size_t);
    LOOKUP(m, "malloc");
    resolving = 0;
    if (!m || !next_calloc || !next_realloc || !next_free || !next_memalign)
        return 0;
    __atomic_store_n(&next_malloc, m, __ATOMIC_RELEASE); /* pairs with the acquire above: the
                                                          * others are set before it */
    return 1;
}

/* 1 when this call is the one that fails. */
static int failing(void)
{
    if (!__atomic_load_n(&started, __ATOMIC_ACQUIRE))
        return 0;
    uint64_t n = __atomic_add_fetch(&counted, 1, __ATOMIC_RELAXED);
    if (fail_at && n == fail_at) {
        if (trace) {
            void *frames[32];
            backtrace_symbols_fd(frames, backtrace(frames, 32), STDERR_FILENO);
        }
        errno = ENOMEM;
        return 1;
    }
    return 0;
}

void *malloc(size_t n)
{
    if (!resolve())
        return arena_alloc(n);
    return failing() ? NULL : next_malloc(n);
}

void *calloc(size_t k, size_t n)
{
    if (!resolve()) {
        if (n && k > SIZE_MAX / n)
            return NULL;
        return arena_alloc(k * n); /* the arena is zero and never reused */
    }
    return failing() ? NULL : next_calloc(k, n);
}

void *realloc(void *p, size_t n)
{
    int ready = resolve();
    if (ready && failing())
        return NULL;
    if (!ready || in_arena(p)) {
        /* Only arena blocks (or none) can exist before the lookup succeeded. The arena does
         * not know sizes: copy what can be there. */
        void *q = ready ? next_malloc(n) : arena_alloc(n);
        if (q && in_arena(p)) {
            size_t avail = (size_t)(arena + sizeof arena - (unsigned char *)p);
            memcpy(q, p, n < avail ? n : avail);
        }
        return q;
    }
    return next_realloc(p, n);
}

void free(void *p)
{
    if (!p || in_arena(p) || !resolve())
        return;
    next_free(p);
}

void *memalign(size_t align, size_t n)
{
    if (!resolve())
        return arena_alloc_aligned(align, n);
    return failing() ? NULL : next_memalign(align, n);
}

int posix_memalign(void **out, size_t align, size_t n)
{
    if (align < sizeof(void *) || (align & (align - 1)))
        return EINVAL;
    void *p = memalign(align, n);
    if (!p)
        return ENOMEM;
    *out = p;
    return 0;
}

void *aligned_alloc(size_t align, size_t n)
{
    return memalign(align, n);
}

void *valloc(size_t n)
{
    return memalign((size_t)sysconf(_SC_PAGESIZE), n);
}

void *pvalloc(size_t n)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    return memalign(page, (n + page - 1) & ~(page - 1));
}

char *strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (p)
        memcpy(p, s, n);
    return p;
}

char *strndup(const char *s, size_t max)
{
    size_t n = strnlen(s, max);
    char *p = malloc(n + 1);
    if (p) {
        memcpy(p, s, n);
        p[n] = '\0';
    }
    return p;
}

__attribute__((constructor)) static void failalloc_start(void)
{
    __atomic_store_n(&may_resolve, 1, __ATOMIC_RELEASE);
    resolve();
    const char *at = getenv("FAILALLOC_AT");
    uint64_t v = 0;
    for (; at && *at >= '0' && *at <= '9'; at++)
        v = v * 10 + (uint64_t)(*at - '0');
    fail_at = v;
    count_file = getenv("FAILALLOC_COUNT_FILE");
    const char *t = getenv("FAILALLOC_TRACE");
    if (t && *t == '1') {
        void *warm[1];
        backtrace(warm, 1); /* loads the unwinder now, not inside the failing call */
        trace = 1;
    }
    __atomic_store_n(&started, 1, __ATOMIC_RELEASE);
}

__attribute__((destructor)) static void failalloc_report(void)
{
    if (!count_file)
        return;
    char buf[24];
    int i = (int)sizeof buf;
    buf[--i] = '\n';
    uint64_t n = __atomic_load_n(&counted, __ATOMIC_RELAXED);
    do
        buf[--i] = (char)('0' + n % 10);
    while ((n /= 10) && i > 0);
    int fd = open(count_file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return;
    ssize_t w = write(fd, buf + i, sizeof buf - (size_t)i);
    (void)w;
    close(fd);
}
