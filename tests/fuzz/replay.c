/*
 * A main() for the fuzz targets without libFuzzer: feeds every file named on
 * the command line, and every regular file in every directory named there
 * (not recursively, in name order, skipping dot files), to
 * LLVMFuzzerTestOneInput once. Prints one line per input; a crash or a
 * sanitizer report ends the process with a non-zero status, as with
 * libFuzzer's own replay mode (./fuzz_x FILE...).
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Run one file; 0 or -1 when it cannot be read. */
static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    unsigned char *buf = NULL, *exact;
    size_t len = 0, cap = 0, n;
    if (!f) {
        perror(path);
        return -1;
    }
    do {
        if (len == cap) {
            unsigned char *b = realloc(buf, cap = cap ? cap * 2 : 4096);
            if (!b) {
                free(buf);
                fclose(f);
                fprintf(stderr, "%s: out of memory\n", path);
                return -1;
            }
            buf = b;
        }
        n = fread(buf + len, 1, cap - len, f);
        len += n;
    } while (n > 0);
    if (ferror(f)) {
        perror(path);
        free(buf);
        fclose(f);
        return -1;
    }
    fclose(f);
    printf("replay %s (%zu bytes)\n", path, len);
    fflush(stdout);
    /* a copy of exactly len bytes, so ASan catches reading past the input */
    exact = malloc(len ? len : 1);
    if (!exact) {
        free(buf);
        fprintf(stderr, "%s: out of memory\n", path);
        return -1;
    }
    if (len) memcpy(exact, buf, len);
    free(buf);
    LLVMFuzzerTestOneInput(exact, len);
    free(exact);
    return 0;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int run_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char **names = NULL;
    size_t n = 0, i;
    int bad = 0;
    if (!d) {
        perror(dir);
        return -1;
    }
    while ((e = readdir(d)) != NULL) {
        char **nn;
        if (e->d_name[0] == '.') continue;
        nn = realloc(names, (n + 1) * sizeof *names);
        if (!nn || !(nn[n] = strdup(e->d_name))) {
            free(nn ? nn : names);
            closedir(d);
            return -1;
        }
        names = nn;
        n++;
    }
    closedir(d);
    if (n) qsort(names, n, sizeof *names, by_name);
    for (i = 0; i < n; i++) {
        size_t len = strlen(dir) + strlen(names[i]) + 2;
        char *path = malloc(len);
        struct stat st;
        if (path) {
            snprintf(path, len, "%s/%s", dir, names[i]);
            if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && run_file(path) != 0) bad = -1;
        } else {
            bad = -1;
        }
        free(path);
        free(names[i]);
    }
    free(names);
    return bad;
}

int main(int argc, char **argv)
{
    int i, bad = 0;
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE|DIR...\n", argv[0]);
        return 2;
    }
    for (i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            perror(argv[i]);
            bad = 1;
        } else if (S_ISDIR(st.st_mode)) {
            bad |= run_dir(argv[i]) != 0;
        } else {
            bad |= run_file(argv[i]) != 0;
        }
    }
    return bad ? 1 : 0;
}
