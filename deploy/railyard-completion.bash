# Bash completion for the `railyard` command.
# Install: source this file from ~/.bashrc, or copy it to /usr/share/bash-completion/completions/railyard.
# Written by hand from `railyard COMMAND --help`; keep it in step when commands or flags change.

_railyard_server_flags="--url --token --timeout --help"

_railyard_flags() {
  case "$1" in
    submit)  echo "--gpus --nodes --gpus-per-node --name --time --qos --launcher --gpu-type --project --target --workdir --array --dependency -d --image --mount --container-workdir --container-writable --container-name --requeue --wait $_railyard_server_flags" ;;
    queue)   echo "--user --me --state --all --json $_railyard_server_flags" ;;
    show)    echo "--bytes --json $_railyard_server_flags" ;;
    cancel|hold|release|resume) echo "$_railyard_server_flags" ;;
    history) echo "--since --until --by --json $_railyard_server_flags" ;;
    logs)    echo "--follow -f --rank --err --poll $_railyard_server_flags" ;;
    watch)   echo "--poll --once $_railyard_server_flags" ;;
    nodes)   echo "--state --json $_railyard_server_flags" ;;
    drain)   echo "--reason $_railyard_server_flags" ;;
    node)    echo "remove" ;;
    token)   echo "create" ;;
    up)      echo "--nodes --profile --state-dir --port --emulate-nodes --leaf-size --timeout --no-agents --no-config --help" ;;
    down)    echo "--state-dir --grace --help" ;;
    topo)    echo "generate show cost convert table" ;;
    sim)     echo "--cluster --preset --sus --nodes --leaf-size --profile --oversubscription --trace --limit --load --scale-gpus --user --policy --pass-interval --threads --comm-max-ratio --comm-share-multi --comm-share-node --on-bad-row --progress --json --jobs-out --help" ;;
  esac
}

_railyard() {
  local cur prev cmd i
  cur="${COMP_WORDS[COMP_CWORD]}"
  prev="${COMP_WORDS[COMP_CWORD-1]}"
  local commands="submit queue show cancel hold release history logs watch nodes drain resume node token up down topo sim"
  cmd=""
  for ((i = 1; i < COMP_CWORD; i++)); do
    case "${COMP_WORDS[i]}" in -*) ;; *) cmd="${COMP_WORDS[i]}"; break ;; esac
  done
  if [[ -z "$cmd" ]]; then
    COMPREPLY=($(compgen -W "$commands --help" -- "$cur"))
    return
  fi
  case "$prev" in
    --launcher) COMPREPLY=($(compgen -W "env mpi none" -- "$cur")); return ;;
    --qos) COMPREPLY=($(compgen -W "high normal scavenger" -- "$cur")); return ;;
    --by) COMPREPLY=($(compgen -W "user project" -- "$cur")); return ;;
    --role) COMPREPLY=($(compgen -W "user admin" -- "$cur")); return ;;
    --profile) COMPREPLY=($(compgen -W "dgx-h100 dgx-a100 dgx-h200" -- "$cur")); return ;;
    --state)
      if [[ "$cmd" == nodes ]]; then COMPREPLY=($(compgen -W "up drain down" -- "$cur"))
      else COMPREPLY=($(compgen -W "PENDING HELD STARTING RUNNING COMPLETED FAILED CANCELLED TIMEOUT NODE_FAIL PREEMPTED" -- "$cur")); fi
      return ;;
    --state-dir|--workdir) COMPREPLY=($(compgen -d -- "$cur")); return ;;
  esac
  if [[ "$cmd" == token && "$prev" == token ]]; then COMPREPLY=($(compgen -W "create" -- "$cur")); return; fi
  if [[ "$cmd" == token ]]; then COMPREPLY=($(compgen -W "--user --role --db --state-dir --help" -- "$cur")); return; fi
  if [[ "$cmd" == node && "$prev" == node ]]; then COMPREPLY=($(compgen -W "remove" -- "$cur")); return; fi
  if [[ "$cur" == -* || "$cmd" == topo || "$cmd" == node ]]; then
    COMPREPLY=($(compgen -W "$(_railyard_flags "$cmd")" -- "$cur"))
    return
  fi
  # Job files for submit; file names elsewhere are harmless.
  if [[ "$cmd" == submit ]]; then COMPREPLY=($(compgen -f -- "$cur")); fi
}

complete -o default -F _railyard railyard
