"""lmrl's tasks in other libraries' APIs, and their environments as lmrl tasks (docs/interop/)."""
