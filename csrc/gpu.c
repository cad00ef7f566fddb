/* Device buffers (CUDA-aware MPI): a message whose buffer is GPU memory gets the record flag
 * MG_DEVICE.  The shim links no CUDA: at MPI_Init it looks for the CUDA driver's
 * cuPointerGetAttribute among the symbols already in the process, which is where a program
 * that uses CUDA (the runtime loads libcuda.so) has it.  Absent, mg_device_flag costs one
 * predictable branch; present, one driver query per buffer of a call that has one.  The
 * driver's type is declared here (cuda.h's values), so the shim builds without CUDA. */
#include <dlfcn.h>

#include "shim.h"

#define MG_CU_POINTER_ATTRIBUTE_MEMORY_TYPE 2 /* CUpointer_attribute */
#define MG_CU_MEMORYTYPE_DEVICE 2             /* CUmemorytype */
#define MG_CUDA_SUCCESS 0

mg_cu_pointer_attr_fn mg_cu_pointer_attr;

void mg_gpu_setup(void)
{
    mg_cu_pointer_attr = (mg_cu_pointer_attr_fn)dlsym(RTLD_DEFAULT, "cuPointerGetAttribute");
}

uint16_t mg_device_flag_slow(const void *buf)
{
    /* NULL is MPI_BOTTOM and empty buffers; the driver answers an error for a host pointer it
     * does not know (and for MPI_IN_PLACE), or before the program made a CUDA context. */
    unsigned int type = 0;
    if (!buf || mg_cu_pointer_attr(&type, MG_CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (unsigned long long)(uintptr_t)buf)
                    != MG_CUDA_SUCCESS)
        return 0;
    return type == MG_CU_MEMORYTYPE_DEVICE ? MG_DEVICE : 0;
}
