/* Gradient-like synthetic data for the demo: each coordinate has its own
 * log-normal scale (a few coordinates matter much more than most, as in real
 * gradients) times fresh normal noise every step, plus a slowly drifting
 * mean so error feedback has signal to deliver. */
#ifndef DEMO_DATA_H_
#define DEMO_DATA_H_

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

typedef struct {
  size_t n;
  uint64_t state;
  float* scale;
  float* mean;
} DemoGradient;

static double demoUniform(uint64_t* s) {
  *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17; /* xorshift64 */
  return ((*s >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

static double demoNormal(uint64_t* s) {
  return sqrt(-2.0 * log(demoUniform(s))) * cos(6.283185307179586 * demoUniform(s));
}

static void demoGradientInit(DemoGradient* g, size_t n, unsigned seed) {
  uint64_t shared = 0x9e3779b97f4a7c15ull; /* the same per-coordinate scales on every rank */
  g->n = n;
  g->state = 0x2545f4914f6cdd1dull * (seed + 1);
  g->scale = malloc(n * sizeof(float));
  g->mean = malloc(n * sizeof(float));
  for (size_t i = 0; g->scale && g->mean && i < n; i++) {
    g->scale[i] = (float)exp(1.5 * demoNormal(&shared));
    g->mean[i] = (float)(0.1 * demoNormal(&shared));
  }
}

static void demoGradientNext(DemoGradient* g, float* out) {
  for (size_t i = 0; i < g->n; i++) out[i] = g->scale[i] * (g->mean[i] + (float)demoNormal(&g->state));
}

static void demoGradientFree(DemoGradient* g) {
  free(g->scale);
  free(g->mean);
}

#endif
