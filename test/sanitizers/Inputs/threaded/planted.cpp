// The negative control of sanitizers.compiler_is_single_threaded: two findings.
#include <thread>
void work();
void planted() {
  std::thread t(work);  // a thread of the compiler's own
  t.join();
  mlir::MLIRContext ctx(registry);  // MLIR's threading left on
  mlir::MLIRContext quiet(registry, mlir::MLIRContext::Threading::DISABLED);  // fine
}
