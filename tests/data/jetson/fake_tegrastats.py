"""TEST DOUBLE for the Jetson-only ``tegrastats`` binary: replays captured tegrastats lines, one per interval.

This is not tegrastats and measures nothing. It lets the sampler's real subprocess handling (process group,
reader thread, SIGTERM/SIGKILL) run on a machine without a Jetson.

    fake_tegrastats.py --interval MS --fixture FILE [--once] [--ignore-sigterm] [--child]

It loops over the fixture's lines until killed, like tegrastats; --once stops after one pass. --ignore-sigterm
makes it survive SIGTERM (so the sampler must fall back to SIGKILL); --child leaves a sleeping child process in
its group (which must die with it).
"""

import argparse
import signal
import subprocess
import sys
import time


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--interval", type=int, default=1000)
    parser.add_argument("--fixture", required=True)
    parser.add_argument("--once", action="store_true")
    parser.add_argument("--ignore-sigterm", action="store_true")
    parser.add_argument("--child", action="store_true")
    args = parser.parse_args()
    if args.ignore_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if args.child:
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    with open(args.fixture, encoding="utf-8") as fixture:
        lines = [line.rstrip("\n") for line in fixture]
    while True:
        for line in lines:
            print(line, flush=True)
            time.sleep(args.interval / 1000)
        if args.once:
            return


if __name__ == "__main__":
    main()
