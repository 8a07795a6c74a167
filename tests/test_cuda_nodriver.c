/* test_cuda_nodriver.c — the CUDA device where the driver cannot be loaded: opening "cuda" is
 * a VRAM_ERR_NO_DEVICE status with a detail saying what was tried, never a crash or a loader
 * error, and bad specs are refused before the driver is even looked for. The driver path is
 * pointed at a file that does not exist (VRAM_LIBCUDA), so this runs the same on GPU machines.
 */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "vram/backend.h"

int main(void) {
    setenv("VRAM_LIBCUDA", "/nonexistent/libcuda.so.1", 1);
    vram_device *dev = (vram_device *)1;
    vram_status st = vram_device_open("cuda", &dev);
    CHECK(st == VRAM_ERR_NO_DEVICE, "no driver is NO_DEVICE, got %s", vram_status_str(st));
    CHECK(dev == NULL, "no device handed out");
    const char *why = vram_last_error();
    printf("detail: %s\n", why);
    CHECK(strstr(why, "no CUDA") != NULL, "detail says there is no CUDA device or driver: %s", why);
#ifdef VRAM_TEST_HAVE_CUDA_H
    CHECK(strstr(why, "/nonexistent/libcuda.so.1") != NULL, "detail names what was tried: %s", why);
#endif
    /* Asking again gives the same answer (the failed load is remembered, not retried into a crash). */
    CHECK(vram_device_open("cuda:0", &dev) == VRAM_ERR_NO_DEVICE, "second open");
    CHECK(vram_device_open("cuda:1:segments", &dev) == VRAM_ERR_NO_DEVICE, "segments spec");
    CHECK(vram_device_open("cuda:0:pages", &dev) == VRAM_ERR_NO_DEVICE, "pages spec");
    CHECK(vram_device_open("cuda:segments", &dev) == VRAM_ERR_NO_DEVICE, "model without ordinal");

    /* Bad specs are bad input whatever the machine has. */
    const char *bad[] = {"cuda:x", "cuda:0:bogus", "cuda:-1", "cuda:0:segments:pages", "cuda:0:", "cuda::1",
                         "cuda:1:2"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        st = vram_device_open(bad[i], &dev);
#ifdef VRAM_TEST_HAVE_CUDA_H
        CHECK(st == VRAM_ERR_INVALID_ARG, "'%s' is invalid, got %s (%s)", bad[i], vram_status_str(st), vram_last_error());
#else
        CHECK(st == VRAM_ERR_NO_DEVICE, "'%s' without CUDA headers, got %s", bad[i], vram_status_str(st));
#endif
    }
    return check_done();
}
