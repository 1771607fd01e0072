"""Test package. One payload store for the session, set before `activities.connection` builds
its data converter: in-process workers and clients use it, and so do the client.py and worker.py
subprocesses, which inherit the environment."""

import atexit
import os
import shutil
import tempfile

if "PAYLOAD_STORE_DIR" not in os.environ:
    os.environ["PAYLOAD_STORE_DIR"] = tempfile.mkdtemp(prefix="payload-store-")
    atexit.register(shutil.rmtree, os.environ["PAYLOAD_STORE_DIR"], ignore_errors=True)
