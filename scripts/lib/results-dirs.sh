# Sourced by the scripts that take committed results: each argument must be
# a run's output directory under results/ (its host.json there), else exit 2.
results_dirs() {
    local dir
    for dir in "$@"; do
        case "$dir" in
            results/*..* | results/ | results) echo "error: $dir: not a directory under results/" >&2; exit 2 ;;
            results/?*) ;;
            *) echo "error: $dir: not a directory under results/" >&2; exit 2 ;;
        esac
        [ -f "$dir/host.json" ] || { echo "error: $dir: no host.json (not a run's output)" >&2; exit 2; }
    done
}
