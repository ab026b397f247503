# src/exec
