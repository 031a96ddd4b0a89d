# bash completion for weft: commands, each command's options (read from
# `weft CMD --help`, so they never drift from the binary), and file names
# where a command takes a FILE. Installed as bash-completion/completions/weft.

_weft_commands="run compile validate plugins start status list wait watch register terminate
pause resume retry restart signal secret help"

# _weft_files CUR: definition files (.lua, .json) and directories
_weft_files() {
    local f
    COMPREPLY=()
    while IFS= read -r f; do
        if [ -d "$f" ]; then
            COMPREPLY+=("$f/")
        else
            case $f in *.lua | *.json) COMPREPLY+=("$f") ;; esac
        fi
    done < <(compgen -f -- "$1")
    compopt -o filenames -o nospace 2>/dev/null
}

_weft() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD - 1]}
    local weft=${COMP_WORDS[0]} cmd= i w
    COMPREPLY=()
    # the command: the first word that is neither an option nor its value
    for ((i = 1; i < COMP_CWORD; i++)); do
        w=${COMP_WORDS[i]}
        case $w in
        -q | --quiet | --no-color | -h | --help | --*=*) ;;
        -*) ((i++)) ;; # an option that takes a value
        *)
            cmd=$w
            break
            ;;
        esac
    done
    case $prev in
    --input)
        if [[ $cur == @* ]]; then
            COMPREPLY=($(compgen -f -- "${cur#@}"))
            COMPREPLY=("${COMPREPLY[@]/#/@}")
            compopt -o filenames 2>/dev/null
        fi
        return
        ;;
    --plugin-path | --defs)
        COMPREPLY=($(compgen -d -- "$cur"))
        compopt -o filenames 2>/dev/null
        return
        ;;
    -o | --output)
        COMPREPLY=($(compgen -W "text json" -- "$cur"))
        return
        ;;
    --status)
        if [ "$cmd" = list ]; then
            COMPREPLY=($(compgen -W "RUNNING PAUSED COMPLETED FAILED TIMED_OUT TERMINATED" -- "$cur"))
        else
            COMPREPLY=($(compgen -W "COMPLETED FAILED" -- "$cur"))
        fi
        return
        ;;
    --redis | --prefix | --api | --version | --correlation-id | --idempotency-key | --timeout | \
        --reason | --priority | --domain | --name | --since | --limit)
        return
        ;;
    esac
    if [ -z "$cmd" ]; then
        if [[ $cur == -* ]]; then
            COMPREPLY=($(compgen -W "--help --version" -- "$cur"))
        else
            COMPREPLY=($(compgen -W "$_weft_commands" -- "$cur"))
        fi
        return
    fi
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$("$weft" "$cmd" --help 2>/dev/null |
            grep -o -- '--[a-z][a-z-]*' | sort -u)" -- "$cur"))
        return
    fi
    case $cmd in
    run | compile | validate | register | start) _weft_files "$cur" ;;
    secret) [ "$prev" = secret ] && COMPREPLY=($(compgen -W "set list delete" -- "$cur")) ;;
    help) [ "$prev" = help ] && COMPREPLY=($(compgen -W "$_weft_commands" -- "$cur")) ;;
    esac
}
complete -F _weft weft
