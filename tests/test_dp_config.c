/* test_dp_config.c — the DP flags (samples/dp/dp_config.c): every flag lands in its field, flags that
   are not DP's are left to the caller, and bad values or contradictory combinations are rejected. */
#include "dp/dp_config.h"

#include <stdio.h>
#include <string.h>

static int failures = 0;
#define CHECK(cond, ...) do { if (!(cond)) { failures++; printf("FAIL %s:%d: ", __FILE__, __LINE__); \
                                               printf(__VA_ARGS__); printf("\n"); } } while (0)

/* Parses a space-separated command line; returns -1 on a bad flag, else the number of non-DP flags. */
static int parse(DpConfig *c, const char *line) {
    char buf[512], *argv[64];
    int argc = 0;
    snprintf(buf, sizeof buf, "%s", line);
    argv[argc++] = "prog";
    for (char *t = strtok(buf, " "); t && argc < 64; t = strtok(NULL, " ")) argv[argc++] = t;
    dp_config_defaults(c, DP_NORM_DIRECT, DP_CLIP_TWOPASS);
    int others = 0;
    for (int i = 1; i < argc; i++) {
        int r = dp_config_flag(c, argc, argv, &i);
        if (r < 0) return -1;
        if (r == 0) others++;
    }
    return dp_config_check(c) ? -1 : others;
}

int main(void) {
    DpConfig c;
    int r = parse(&c, "--norm flash --clip bk --max-grad-norm 0.5 --noise-multiplier 1.1 --delta 1e-6 "
                      "--max-physical-batch-size 2 --poisson --noise-seed 18446744073709551615 --flash-tile 32 "
                      "--lora-rank 8 --lora-alpha 16 --lora-targets q,k,down --dataset-size 1000 --batch-size 8");
    CHECK(r == 2, "--batch-size 8 must be left to the caller, got %d", r);
    CHECK(c.norm == DP_NORM_FLASH && c.clip == DP_CLIP_BK && c.max_grad_norm == 0.5 && c.noise_multiplier == 1.1 &&
          c.delta == 1e-6 && c.max_physical_batch == 2 && c.poisson && c.seed == 18446744073709551615ull && c.seed_given &&
          c.flash_tile == 32 && c.lora_rank == 8 && c.lora_alpha == 16 &&
          c.lora_targets == (LORA_Q | LORA_K | LORA_DOWN) && c.dataset_size == 1000, "values not parsed");
    char buf[64];
    CHECK(!strcmp(dp_lora_targets_string(c.lora_targets, buf, sizeof buf), "q,k,down"), "targets string %s", buf);
    r = parse(&c, "--norm mixed --target-epsilon 3");
    CHECK(r == 0 && c.norm == DP_NORM_MIXED && c.target_epsilon == 3, "target epsilon");
    r = parse(&c, "");
    CHECK(r == 0 && c.max_grad_norm == 1.0 && c.noise_multiplier == 1.0 && c.delta == 1e-5 &&
          c.lora_targets == (LORA_Q | LORA_V) && c.flash_tile == 128, "defaults");
    r = parse(&c, "--adjacency replace-one --secure-noise");
    CHECK(r == 0 && c.replace_one && c.secure_noise, "--adjacency replace-one --secure-noise");
    r = parse(&c, "--adjacency zero-out --poisson");
    CHECK(r == 0 && !c.replace_one && !c.secure_noise && c.poisson, "--adjacency zero-out with --poisson; defaults: Philox, zero-out");
    const char *bad[] = { "--adjacency replace-one --poisson", "--adjacency add-remove", "--adjacency",
                          "--norm fast", "--clip", "--max-grad-norm 0", "--max-grad-norm 1x", "--delta 1",
                          "--delta 0", "--max-physical-batch-size 0", "--max-physical-batch-size 2.5", "--noise-seed -1",
                          "--lora-targets q,x", "--lora-targets q,", "--lora-rank -1", "--noise-multiplier -1",
                          "--noise-multiplier 1 --target-epsilon 2", "--lora-alpha 8", "--flash-tile 0",
                          "--noise-multiplier nan", "--target-epsilon inf", "--dataset-size 0" };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++)
        CHECK(parse(&c, bad[k]) == -1, "'%s' must be rejected", bad[k]);
    dp_config_defaults(&c, DP_NORM_DIRECT, DP_CLIP_TWOPASS);
    CHECK(dp_config_extra(&c, "--poisson", "x") == 1 && c.poisson, "switch through the extra callback");
    CHECK(dp_config_extra(&c, "--norm", "ghost") == 2 && c.norm == DP_NORM_GHOST, "valued flag through the extra callback");
    CHECK(dp_config_extra(&c, "--steps", "3") == 0, "a trainer flag is not DP's");
    CHECK(dp_config_extra(&c, "--norm", NULL) == -1 && dp_config_extra(&c, "--norm", "x") == -1, "bad values via callback");
    CHECK(strstr(DP_CONFIG_USAGE, "--lora-targets") != NULL, "usage");
    CHECK(!strcmp(dp_norm_name(DP_NORM_GHOST), "ghost") && !strcmp(dp_clip_name(DP_CLIP_BK), "bk"), "names");
    if (failures) { printf("%d check(s) failed\n", failures); return 1; }
    printf("dp config: all checks passed\n");
    return 0;
}
