// Symbol visibility: the shared library exports only what is marked DUET_API.
#pragma once

#if defined(_WIN32)
#define DUET_API
#else
#define DUET_API [[gnu::visibility("default")]]
#endif
