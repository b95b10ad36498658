// Which memory a pointer lives in.
#pragma once

namespace dct {

// Device or managed memory. A process with no CUDA context cannot hold
// device memory, so until one exists the answer is "host" without touching
// CUDA: host-only jobs on GPU nodes create no context (and pay no context's
// memory and start-up) and load no CUDA component just to classify their
// buffers.
bool isDeviceMemory(const void* ptr);

}  // namespace dct
