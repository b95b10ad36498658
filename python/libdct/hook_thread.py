"""The communication thread of a DctState: runs jobs in the order they were
queued, so that every rank issues its collectives in the same order while
the training loop goes on.

It is not a daemon thread: at interpreter exit Python joins it before
finalizing, so it never has the interpreter torn down under it while it is
inside a C call or a callback from one (a daemon thread woken there is
ended with pthread_exit, which unwinds through C++ frames and aborts). It
ends on its own once the main thread has finished and no job is left, and
it holds no reference to the state, so a state dropped without close() is
collected and its finalizer stops the thread."""
import queue
import threading

_POLL_S = 0.1  # how soon the thread notices that the main thread has ended


def _serve(jobs):
    main = threading.main_thread()
    while True:
        try:
            job = jobs.get(timeout=_POLL_S)
        except queue.Empty:
            if not main.is_alive():
                return
            continue
        if job is None:
            return
        try:
            job()
        except BaseException:  # jobs settle their own failures; the thread must outlive any
            pass
        del job  # holds the state: a dropped state must be collectable


class Worker:
    def __init__(self, name="libdct-comm"):
        self._jobs = queue.Queue()
        self._thread = threading.Thread(target=_serve, args=(self._jobs,), name=name, daemon=False)
        self._thread.start()

    def on_thread(self):
        return threading.current_thread() is self._thread

    def submit(self, job):
        """Queues job (a callable that never raises)."""
        self._jobs.put(job)

    def stop(self, join=True):
        """Lets the queued jobs run, then ends the thread (idempotent)."""
        if self._thread.is_alive():
            self._jobs.put(None)
            if join and not self.on_thread():
                self._thread.join()
