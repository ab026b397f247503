# rank_faults.sh: sourced by the MPI shell tests after tap.sh.  A rank
# killed in the middle of a job: kill_a_rank NAME MPIRUN-AND-DLTRAIN-ARGS...
# starts the job in the background (its output in $TMPDIR_TEST/NAME.txt; the
# arguments must mention $TMPDIR_TEST/NAME so that its processes can be
# found), kills the third of its processes after 2 s and reports three
# results: mpirun ends within 30 s, no process is left behind, and the
# output names the killed rank.
kill_a_rank() {
    name=$1
    shift
    "$@" > "$TMPDIR_TEST/$name.txt" 2>&1 &
    mpipid=$!
    victim=""
    for i in $(seq 1 100); do
        victim=$(pgrep -f -- "dltrain --net.*$TMPDIR_TEST/$name" | sort -n | sed -n 3p)
        [ -n "$victim" ] && break
        sleep 0.1
    done
    sleep 2
    vrank=$(tr '\0' '\n' < /proc/$victim/environ 2>/dev/null | sed -n 's/^OMPI_COMM_WORLD_RANK=//p')
    echo "# killing rank $vrank (pid $victim)"
    kill -9 $victim 2>/dev/null
    for i in $(seq 1 300); do kill -0 $mpipid 2>/dev/null || break; sleep 0.1; done
    ! kill -0 $mpipid 2>/dev/null; tap_result $? "$name: killing one rank ends mpirun within 30 s"
    kill -9 $mpipid 2>/dev/null
    sleep 1
    ! pgrep -f -- "$TMPDIR_TEST/$name" >/dev/null; tap_result $? "$name: no process is left behind after a kill"
    [ -n "$vrank" ] && grep -Eq "process rank $vrank with PID [0-9]+ .*(signal 9|Killed)" "$TMPDIR_TEST/$name.txt"
    tap_result $? "$name: the job's output names the killed rank"
    sed 's/^/#   /' "$TMPDIR_TEST/$name.txt" | head -12
}

# A rank that stops responding: stall_a_rank NAME WARNING ABORT
# MPIRUN-AND-DLTRAIN-ARGS... runs the job (which must make rank 2 sleep in
# step 1, warn after 1 s and give up after 4 s: --debug-slow-rank 2:600000
# --stall-warning 1 --stall-timeout 4, and mention $TMPDIR_TEST/NAME) under
# a 90 s limit and reports five results: exit status 1, the output matches
# the regular expressions WARNING and ABORT, the job ended within 60 s, no
# process is left behind.
stall_a_rank() {
    name=$1 warning=$2 abort=$3
    shift 3
    start=$(date +%s)
    expect_status 1 "$name: a stalled rank ends the job" -- timeout -s KILL 90 "$@"
    end=$(date +%s)
    expect_output "$warning" "$name: a waiting rank warns, naming rank 2 and the step"
    expect_output "$abort" "$name: the abort message names rank 2"
    [ $((end - start)) -lt 60 ]; tap_result $? "$name: the job ended within the timeout ($((end - start)) s)"
    sleep 1
    ! pgrep -f -- "$TMPDIR_TEST/$name" >/dev/null; tap_result $? "$name: no process is left behind after a stall"
}
