/* dct.h must compile as strict C99 with no MPI or CUDA on the include path. */
#include <dct/dct.h>
#include <stdio.h>

int main(void) {
  dctConfig_t config = DCT_CONFIG_INITIALIZER;
  dctCallbacks_t callbacks = DCT_CALLBACKS_INITIALIZER;
  int version = 0;
  if (config.size != sizeof(dctConfig_t) || config.magic != DCT_CONFIG_MAGIC) return 1;
  if (callbacks.size != sizeof(dctCallbacks_t) || callbacks.magic != DCT_CALLBACKS_MAGIC || callbacks.voteMax) return 1;
  (void)version;
  printf("dct.h C99 ok, version code %d\n", DCT_VERSION_CODE);
  return 0;
}
