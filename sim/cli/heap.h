// The heap settings a simulation point runs best with (heap.cc says why).
#ifndef SHARDSIM_SIM_CLI_HEAP_H_
#define SHARDSIM_SIM_CLI_HEAP_H_

namespace shardsim {

// Keeps freed memory on the heap and asks for transparent huge pages
// where the heap will grow. Once, first thing in main; best effort.
void SetUpHeap();

}  // namespace shardsim

#endif  // SHARDSIM_SIM_CLI_HEAP_H_
