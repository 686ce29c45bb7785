"""The primitives every room stands on: ids, time, canonical JSON, isolation scopes,
the types on both sides of the storage seams, and the threads that run at idle priority."""
