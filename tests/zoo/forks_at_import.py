"""A module that forks a process when it is imported, which would outlive whoever imported it:
the grandchild writes its process ID to the file named by FORKED_PID_FILE and sleeps. Its RNN
is torch.nn's, so the checks pass; the harness must still end the grandchild with the run."""
import os
import time

import torch

if os.environ.get("FORKED_PID_FILE") and os.fork() == 0:
    with open(os.environ["FORKED_PID_FILE"], "a") as out:
        out.write(f"{os.getpid()}\n")
    time.sleep(3600)
    os._exit(0)

RNN = torch.nn.RNN
