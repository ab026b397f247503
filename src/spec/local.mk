# src/spec
