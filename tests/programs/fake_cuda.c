/* A stand-in for the CUDA driver (libcuda.so) in tests without a GPU: cuPointerGetAttribute
 * answers CU_MEMORYTYPE_DEVICE for the one address range the program registers with
 * fake_cuda_register, CU_MEMORYTYPE_HOST for every other pointer (as the driver does for
 * registered host memory), and counts the queries.  Built as a shared library. */
#include <stddef.h>
#include <stdint.h>

static uintptr_t device_lo, device_hi;
static long queries;

void fake_cuda_register(void *p, size_t n)
{
    device_lo = (uintptr_t)p;
    device_hi = device_lo + n;
}

long fake_cuda_queries(void) { return queries; }

int cuPointerGetAttribute(void *data, int attribute, unsigned long long ptr)
{
    queries++;
    if (attribute != 2) /* CU_POINTER_ATTRIBUTE_MEMORY_TYPE: the only one the shim asks */
        return 1;       /* CUDA_ERROR_INVALID_VALUE */
    *(unsigned int *)data = ptr >= device_lo && ptr < device_hi ? 2 : 1; /* DEVICE : HOST */
    return 0;
}
