// The negative control of sanitizers.compiler_is_single_threaded: seven findings.
#include <thread>
void work();
void planted() {
  std::thread t(work);  // 1: a thread of the compiler's own
  t.join();
  mlir::MLIRContext ctx(registry);  // 2: MLIR's threading left on
  mlir::MLIRContext plain;          // 3: default-constructed, threading on
  auto owned = std::make_unique<mlir::MLIRContext>(registry);  // 4
  llvm::DefaultThreadPool pool;     // 5: an LLVM thread pool
  builder.setNumCompileThreads(2);  // 6: ORC's concurrent compilation
  quiet.enableMultithreading();     // 7
  mlir::MLIRContext quiet(registry, mlir::MLIRContext::Threading::DISABLED);  // fine
  mlir::MLIRContext wrapped(registry,
                            mlir::MLIRContext::Threading::DISABLED);  // fine, over two lines
}
