"""The doctor's I/O: fetching the facts its checks judge (docs/doctor.md), from Google's REST
APIs through an injected HTTP session, from the local stack's emulators, and the parallel
runner that turns them into results."""
